#include "movement/job_tracker.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <utility>

#include "runtime/clock.hpp"
#include "runtime/executor.hpp"

namespace sw::movement {

namespace {

thread_local JobHandle t_running = nullptr;

}  // namespace

std::string DrainReport::warning() const {
  if (left == 0) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "strideweave: warning: abandoning %zu move(s) still pending at interpreter exit (%s after %.1f s; "
                "set STRIDEWEAVE_EXIT_TIMEOUT to wait longer)\n",
                left, interrupted ? "interrupted" : "timed out", waited_s);
  return buf;
}

void JobTracker::check_accepting() const {
  if (shutting_down_.load()) throw std::runtime_error("cannot start a move: interpreter shutdown has begun");
}

void JobTracker::begin(JobHandle job, bool tracked) {
  check_accepting();
  in_flight_.fetch_add(1);
  if (!tracked) return;
  try {
    pending_.insert(job);
  } catch (...) {
    // Out of memory: the job only loses its fork-time failure.
  }
}

void JobTracker::untrack(JobHandle job) noexcept { pending_.erase(job); }

void JobTracker::cancel(JobHandle job) noexcept {
  untrack(job);
  end();
}

void JobTracker::launch(JobHandle job, bool tracked, std::function<void()> work) {
  begin(job, tracked);
  try {
    submit(std::move(work));
  } catch (...) {
    cancel(job);
    throw std::runtime_error("cannot start a move worker thread");
  }
}

DrainReport JobTracker::drain(double limit_s, const std::function<bool()>& keep_waiting) {
  shutting_down_.store(true);
  const int64_t start = now_ns();
  const int64_t deadline = deadline_after(start, limit_s);
  DrainReport report;
  int64_t next_check = start;
  while (in_flight_.load() != 0 && now_ns() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (now_ns() >= next_check) {
      next_check = now_ns() + 20'000'000;
      if (!keep_waiting()) {
        report.interrupted = true;
        break;
      }
    }
  }
  report.left = in_flight_.load();
  report.waited_s = static_cast<double>(now_ns() - start) / 1e9;
  return report;
}

std::vector<JobHandle> JobTracker::after_fork_child(JobHandle keep) {
  in_flight_.store(0);
  std::unordered_set<JobHandle> jobs;
  jobs.swap(pending_);
  if (keep && jobs.erase(keep)) pending_.insert(keep);
  return {jobs.begin(), jobs.end()};
}

JobTracker& job_tracker() {
  static auto* tracker = new JobTracker();
  return *tracker;
}

RunningJob::RunningJob(JobHandle job) noexcept { t_running = job; }
RunningJob::~RunningJob() { t_running = nullptr; }
JobHandle RunningJob::current() noexcept { return t_running; }

double exit_timeout_s(const char* value) noexcept {
  if (value && *value) {
    char* end = nullptr;
    const double d = std::strtod(value, &end);
    if (end && *end == '\0' && d >= 0.0) return d;
  }
  return 10.0;
}

int64_t deadline_after(int64_t now, double secs) noexcept {
  return now + static_cast<int64_t>(secs > 1e9 ? 1e18 : secs * 1e9);
}

}  // namespace sw::movement

// Bookkeeping of submitted moves between submission and their terminal
// commit: how many are in flight (so interpreter exit can wait for them),
// which are pending (so a forked child can fail the ones whose worker stayed
// in the parent), which one this thread is running, and whether shutdown has
// begun (from then on no move starts). Jobs are opaque handles: the binding
// owns them and runs their commit.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace sw::movement {

using JobHandle = void*;

// What the exit drain saw when it stopped waiting.
struct DrainReport {
  std::size_t left = 0;      // jobs still in flight (abandoned)
  bool interrupted = false;  // keep_waiting() ended the wait
  double waited_s = 0.0;

  // The warning printed when jobs are abandoned ("" when none are).
  std::string warning() const;
};

class JobTracker {
 public:
  JobTracker() = default;
  JobTracker(const JobTracker&) = delete;
  JobTracker& operator=(const JobTracker&) = delete;

  // Counts a job in flight; tracked jobs are also remembered as pending
  // until untrack(). Throws std::runtime_error once shutdown has begun (the
  // job is then neither counted nor tracked). The pending set is not locked:
  // the caller serialises track/untrack/after_fork_child (the binding holds
  // the GIL for all three).
  void begin(JobHandle job, bool tracked);
  // The job reached its terminal commit: no longer pending.
  void untrack(JobHandle job) noexcept;
  // Undoes begin() for a job whose worker could not be started.
  void cancel(JobHandle job) noexcept;
  // begin(), then runs work on a pool worker (sw::submit). When no worker
  // can be started, begin() is undone and std::runtime_error ("cannot start
  // a move worker thread") thrown: the job is still the caller's.
  void launch(JobHandle job, bool tracked, std::function<void()> work);
  // The job's worker is done with it (after its commit).
  void end() noexcept { in_flight_.fetch_sub(1); }
  // Several lane-committed jobs at once (the lane gave up on them).
  void end(std::size_t n) noexcept { in_flight_.fetch_sub(n); }
  std::size_t in_flight() const noexcept { return in_flight_.load(); }
  bool pending(JobHandle job) const { return pending_.count(job) != 0; }

  bool shutting_down() const noexcept { return shutting_down_.load(); }
  // Throws std::runtime_error ("cannot start a move: interpreter shutdown
  // has begun") once shutdown has begun.
  void check_accepting() const;

  // Marks shutdown and waits, polling every millisecond without holding a
  // lock a fork could orphan, until nothing is in flight or limit_s passed.
  // keep_waiting() runs at the start and then every 20 ms; false ends the
  // wait early (Ctrl-C).
  DrainReport drain(double limit_s, const std::function<bool()>& keep_waiting);

  // In a forked child: nothing is in flight there any more. Returns the
  // pending jobs to fail, except keep (the job this thread was running when
  // it forked: the child continues it on this thread), which stays pending.
  std::vector<JobHandle> after_fork_child(JobHandle keep);

 private:
  // A plain atomic (no lock), so a forked child can simply reset it.
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<bool> shutting_down_{false};
  std::unordered_set<JobHandle> pending_;
};

// The process's tracker. Never destroyed: workers may outlive static
// destruction at exit.
JobTracker& job_tracker();

// Marks the job this worker thread runs for the scope's lifetime.
class RunningJob {
 public:
  explicit RunningJob(JobHandle job) noexcept;
  ~RunningJob();
  RunningJob(const RunningJob&) = delete;
  RunningJob& operator=(const RunningJob&) = delete;
  // This thread's running job, or null.
  static JobHandle current() noexcept;
};

// Seconds the exit drain waits: value (STRIDEWEAVE_EXIT_TIMEOUT) when it is
// a non-negative number, else 10.
double exit_timeout_s(const char* value) noexcept;

// now_ns + secs, saturating for huge values (secs >= 0).
int64_t deadline_after(int64_t now_ns, double secs) noexcept;

}  // namespace sw::movement

// The piece helper team (see runtime/pieces.hpp).
#include "runtime/pieces.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/clock.hpp"
#include "runtime/executor.hpp"

namespace sw {

namespace {

// More helpers than this are never started, whatever ways asks for.
constexpr size_t kMaxHelpers = 7;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Polls ready() for up to budget_ns; true once it holds. The clock is read
// every 64 polls only (a pause is tens of nanoseconds, a clock read more).
// With yield_core the poller also yields its core there (see Pieces::wait).
template <class Ready>
bool spin_until(Ready ready, long long budget_ns, bool yield_core = false) {
  const int64_t deadline = now_ns() + budget_ns;
  for (;;) {
    for (int k = 0; k < 64; ++k) {
      if (ready()) return true;
      cpu_relax();
    }
    if (now_ns() >= deadline) return ready();
    if (yield_core) sched_yield();
  }
}

// The pieces of one call and who has finished them; shared with the
// helpers, which may take it after the call returned (they then find nothing
// left to claim).
struct Pieces {
  explicit Pieces(size_t count, const std::function<void(size_t)>& p) : n(count), piece(&p) {}
  const size_t n;
  const std::function<void(size_t)>* piece;  // valid while a piece is unclaimed
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::mutex m;
  std::condition_variable cv;

  // Runs unclaimed pieces until none is left; returns how many it ran.
  size_t drain() noexcept {
    for (size_t ran = 0;; ++ran) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return ran;
      (*piece)(i);
      if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        // Under the lock: the caller either sees the count before it
        // sleeps or is asleep and gets this notification.
        std::lock_guard<std::mutex> lk(m);
        cv.notify_all();
      }
    }
  }

  // On the caller, after its own drain: the helpers finish the pieces they
  // claimed (at most one each), usually within a piece's time, so poll for
  // about two of the caller's own pieces (at most kPieceCallerSpinNs) and
  // sleep only when a helper lost its core.
  // The poll yields the core now and then: on a busy machine the helper
  // may share the caller's core, and then it finishes its piece at once
  // instead of after the poll. (The helpers' own poll does not yield: a
  // spinning thread of another library on a helper's core, an OpenMP
  // worker say, would take the core for a whole slice.)
  void wait(long long spin_ns) {
    auto done = [this] { return finished.load(std::memory_order_acquire) == n; };
    if (spin_until(done, spin_ns, /*yield_core=*/true)) return;
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, done);
  }
};

struct Team {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Pieces>> work;  // one entry per helper a call wants
  std::atomic<size_t> queued{0};             // work.size(), read by polling helpers
  size_t threads = 0;
  size_t sleeping = 0;
};

// Never deleted: detached helpers reference it until process exit.
std::atomic<Team*> g_team{nullptr};
std::once_flag g_atfork_once;

void reset_in_child() {
  // The parent's helpers do not exist in a forked child, and one may hold
  // the team's mutex: start afresh there.
  g_team.store(nullptr);
}

Team* team() {
  Team* t = g_team.load(std::memory_order_acquire);
  if (t) return t;
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, reset_in_child); });
  auto* fresh = new Team;
  if (g_team.compare_exchange_strong(t, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;  // another thread won; it holds no threads yet
  return t;
}

void helper(Team* t) {
  // Normal priority even when started from a batch-priority executor
  // worker (threads inherit the policy of the thread that starts them).
  sched_param sp{};
  pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
  std::unique_lock<std::mutex> lk(t->m);
  for (;;) {
    if (t->work.empty()) {
      lk.unlock();
      spin_until([t] { return t->queued.load(std::memory_order_acquire) != 0; }, kPieceHelperSpinNs);
      lk.lock();
      while (t->work.empty()) {
        ++t->sleeping;
        t->cv.wait(lk);
        --t->sleeping;
      }
    }
    std::shared_ptr<Pieces> s = std::move(t->work.front());
    t->work.pop_front();
    t->queued.store(t->work.size(), std::memory_order_release);
    lk.unlock();
    s->drain();
    s.reset();
    lk.lock();
  }
}

// Queues up to `helpers` entries for s, starting helper threads as needed.
// Returns how many were queued (0 when no helper thread exists or can be
// started). Never throws.
size_t post(Team* t, const std::shared_ptr<Pieces>& s, size_t helpers) noexcept {
  size_t wake = 0, posted = 0;
  {
    std::lock_guard<std::mutex> lk(t->m);
    while (t->threads < std::min(helpers, kMaxHelpers)) {
      try {
        std::thread(helper, t).detach();
      } catch (...) {
        break;
      }
      ++t->threads;
    }
    try {
      for (; posted < std::min(helpers, t->threads); ++posted) t->work.push_back(s);
    } catch (...) {
      // Out of memory in the deque: the entries queued so far still help.
    }
    t->queued.store(t->work.size(), std::memory_order_release);
    wake = std::min(posted, t->sleeping);
  }
  if (wake == 1) t->cv.notify_one();
  else if (wake > 1) t->cv.notify_all();
  return posted;
}

// Drops the entries of s that no helper took (the caller finished without
// them), so idle helpers are not woken for nothing.
void withdraw(Team* t, const Pieces* s) noexcept {
  std::lock_guard<std::mutex> lk(t->m);
  t->work.erase(std::remove_if(t->work.begin(), t->work.end(),
                               [s](const std::shared_ptr<Pieces>& e) { return e.get() == s; }),
                t->work.end());
  t->queued.store(t->work.size(), std::memory_order_release);
}

}  // namespace

void run_pieces(size_t n, const std::function<void(size_t)>& piece, int ways) {
  if (n == 0) return;
  if (ways <= 0) ways = static_cast<int>(executor_core_threads());
  if (ways < 2 || n < 2) {
    for (size_t i = 0; i < n; ++i) piece(i);
    return;
  }
  std::shared_ptr<Pieces> state;
  Team* t = nullptr;
  try {
    state = std::make_shared<Pieces>(n, piece);
    t = team();
  } catch (...) {
    // Out of memory for the bookkeeping: this thread copies alone.
    for (size_t i = 0; i < n; ++i) piece(i);
    return;
  }
  const size_t posted = post(t, state, std::min<size_t>(static_cast<size_t>(ways - 1), n - 1));
  const int64_t start = now_ns();
  const size_t ran = state->drain();
  if (posted == 0) return;  // this thread ran every piece
  withdraw(t, state.get());
  const long long per_piece = ran ? (now_ns() - start) / static_cast<long long>(ran) : kPieceCallerSpinNs;
  state->wait(std::min<long long>(kPieceCallerSpinNs, 2 * per_piece + 10'000));
}

size_t piece_helper_count() {
  Team* t = g_team.load(std::memory_order_acquire);
  if (!t) return 0;
  std::lock_guard<std::mutex> lk(t->m);
  return t->threads;
}

}  // namespace sw

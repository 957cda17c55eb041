// The transfer executor (see runtime/executor.hpp).
#include "runtime/executor.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <system_error>
#include <thread>

namespace sw {

bool Completion::set() {
  // Notify under the lock: a waiter may destroy this object as soon as it
  // sees done_, and it cannot return from wait() before the lock is free, so
  // set() touches nothing after the unlock.
  std::lock_guard<std::mutex> lk(m_);
  if (done_) return false;
  done_ = true;
  cv_.notify_all();
  return true;
}

bool Completion::done() const {
  std::lock_guard<std::mutex> lk(m_);
  return done_;
}

void Completion::wait() const {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [this] { return done_; });
}

bool Completion::wait_for(std::chrono::nanoseconds timeout) const {
  std::unique_lock<std::mutex> lk(m_);
  return cv_.wait_for(lk, timeout, [this] { return done_; });
}

namespace {

constexpr size_t kMaxThreads = 64;
constexpr auto kExtraIdle = std::chrono::seconds(2);

struct Pool {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  size_t threads = 0;  // alive workers
  size_t idle = 0;     // workers waiting for a job
  size_t pending = 0;  // queued plus running jobs
  size_t blocked = 0;  // workers blocked waiting for other work (BlockingScope)
  size_t core = 2;
};

// The pool a worker thread belongs to (NULL on every other thread).
thread_local Pool* t_worker_of = nullptr;

// Never deleted: detached workers may still reference it at process exit.
std::atomic<Pool*> g_pool{nullptr};
std::once_flag g_atfork_once;

void reset_in_child() {
  // The parent's workers do not exist in the child and its mutex may be
  // held by one of them: abandon that state and start lazily afresh.
  g_pool.store(nullptr);
}

Pool* pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return p;
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, reset_in_child); });
  auto* fresh = new Pool;
  unsigned hw = std::thread::hardware_concurrency();
  fresh->core = std::clamp<size_t>(hw == 0 ? 2 : hw, 2, 4);
  if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;  // another thread won; it holds no threads yet
  return p;
}

// Workers run bulk copies and waits: as batch threads a freshly woken one
// does not preempt the thread that just handed it work (a move_async caller
// then returns its handle without waiting for a core). Advisory: a failure
// leaves the default policy.
void lower_wakeup_priority() {
#ifdef SCHED_BATCH
  sched_param sp{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
}

void worker(Pool* p);

// Starts one more worker when queued work has nobody to run it. Workers
// blocked in a BlockingScope do not count against the cap: they wait for
// queued work, so the cap must not stop that work from starting. Called with
// p->m held. false when no thread could be started.
bool grow_if_needed(Pool* p) {
  if (p->idle >= p->queue.size() || p->threads - p->blocked >= kMaxThreads) return true;
  try {
    std::thread(worker, p).detach();
    ++p->threads;
    return true;
  } catch (...) {
    return false;
  }
}

void worker(Pool* p) {
  t_worker_of = p;
  lower_wakeup_priority();
  std::unique_lock<std::mutex> lk(p->m);
  for (;;) {
    while (p->queue.empty()) {
      ++p->idle;
      if (p->threads > p->core) {
        bool woke = p->cv.wait_for(lk, kExtraIdle, [p] { return !p->queue.empty(); });
        --p->idle;
        if (!woke && p->threads > p->core) {
          --p->threads;
          return;
        }
      } else {
        p->cv.wait(lk);
        --p->idle;
      }
    }
    std::function<void()> job = std::move(p->queue.front());
    p->queue.pop_front();
    lk.unlock();
    try {
      job();
    } catch (abi::__forced_unwind&) {
      throw;  // thread cancellation (pthread_exit) must keep unwinding
    } catch (...) {
      // Jobs report their own failures; never let one kill the worker.
    }
    job = nullptr;  // drop captured state outside the lock
    lk.lock();
    --p->pending;
  }
}

}  // namespace

void submit(std::function<void()> job) {
  Pool* p = pool();
  std::unique_lock<std::mutex> lk(p->m);
  p->queue.push_back(std::move(job));
  ++p->pending;
  if (!grow_if_needed(p) && p->threads == 0) {
    // Nobody would ever run it: take it back and report.
    p->queue.pop_back();
    --p->pending;
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "cannot start a worker thread");
  }
  lk.unlock();
  p->cv.notify_one();
}

BlockingScope::BlockingScope() {
  Pool* p = t_worker_of;
  if (!p || p != g_pool.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lk(p->m);
  pool_ = p;
  ++p->blocked;
  grow_if_needed(p);
}

BlockingScope::~BlockingScope() {
  if (!pool_) return;
  Pool* p = static_cast<Pool*>(pool_);
  std::lock_guard<std::mutex> lk(p->m);
  --p->blocked;
}

bool on_worker_thread() { return t_worker_of != nullptr; }

size_t executor_thread_count() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (!p) return 0;
  std::lock_guard<std::mutex> lk(p->m);
  return p->threads;
}

size_t executor_core_threads() { return pool()->core; }

size_t executor_pending_jobs() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (!p) return 0;
  std::lock_guard<std::mutex> lk(p->m);
  return p->pending;
}

}  // namespace sw

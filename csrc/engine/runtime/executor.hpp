// The transfer executor: a small process-wide pool of worker threads running
// move jobs, and the completion state a move handle waits on.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace sw {

// One-shot terminal state: set() once, wait() from any number of threads.
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  // Marks the state done and wakes every waiter; later calls do nothing.
  // Returns true for the call that made the transition.
  bool set();
  bool done() const;
  void wait() const;
  // false when the timeout passed first.
  bool wait_for(std::chrono::nanoseconds timeout) const;

 private:
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  bool done_ = false;
};

// Runs job on a worker thread. The pool starts lazily with 2-4 core threads
// (by hardware concurrency); when every worker is busy, for instance blocked
// in a user hook, an extra worker is started (up to a cap, not counting
// workers in a BlockingScope) so queued work never waits behind a job that
// waits for it. Extra workers exit after being idle for a while. Workers are detached and the pool state is never
// destroyed, so process exit neither joins nor races a static destructor;
// in a forked child the pool starts afresh. Jobs must not throw (an escaping
// exception is swallowed so a worker never dies with std::terminate).
void submit(std::function<void()> job);

// Marks the current worker thread as blocked waiting for other work (say a
// move's _copy hook waiting on a nested move) for the scope's lifetime:
// queued jobs then get a new worker even past the cap, so any number of
// such waits never deadlock the pool. Does nothing off worker threads.
class BlockingScope {
 public:
  BlockingScope();
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

 private:
  void* pool_ = nullptr;
};

// True on a worker thread of the pool.
bool on_worker_thread();

// Workers currently alive (core and extra); 0 before the first submit.
size_t executor_thread_count();
// Core thread count the pool keeps (2-4).
size_t executor_core_threads();
// Jobs submitted but not yet finished.
size_t executor_pending_jobs();

}  // namespace sw

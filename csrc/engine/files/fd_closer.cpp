// Closing file descriptors on one background thread (see files/fd_closer.hpp).
#include "files/fd_closer.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

namespace sw {

namespace {

struct Pending {
  int fd;
  int64_t bytes;
};

// After the first descriptor of a batch arrives the thread waits this long,
// or until the batch is full, before closing: a burst of releases then costs
// one wake-up, not one each (on a busy machine the closer often shares the
// caller's core, and every wake-up is two context switches).
constexpr auto kLinger = std::chrono::milliseconds(1);
constexpr size_t kBatchCloses = 16;
constexpr int64_t kBatchBytes = int64_t(8) << 20;

struct Closer {
  std::mutex m;
  std::condition_variable work;  // the thread waits here for descriptors
  std::condition_variable done;  // wait_background_closes() waits here
  std::deque<Pending> queue;     // everything below is guarded by m
  int64_t queued_bytes = 0;
  bool started = false;
  bool sleeping = false;          // the thread waits on `work` for a first descriptor
  bool lingering = false;         // ... or for a batch to gather
  bool held = false;              // hold_background_closes(true)
  unsigned long long handed = 0;  // descriptors queued, ever
  unsigned long long closed = 0;  // of those, closed
  bool full() const { return queue.size() >= kBatchCloses || queued_bytes >= kBatchBytes; }
};

Closer* closer();

void run(Closer* c) {
#ifdef SCHED_BATCH
  sched_param sp{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);  // advisory
#endif
  std::unique_lock<std::mutex> lk(c->m);
  for (;;) {
    while (c->queue.empty() || c->held) {
      c->sleeping = true;
      c->work.wait(lk);
      c->sleeping = false;
    }
    c->lingering = true;
    c->work.wait_for(lk, kLinger, [c] { return c->full(); });
    c->lingering = false;
    if (c->held) continue;
    // One at a time, each taken off the queue under the lock: a fork then
    // finds every descriptor either queued (the child closes its copy) or
    // the one being closed right now.
    while (!c->queue.empty() && !c->held) {
      const Pending p = c->queue.front();
      c->queue.pop_front();
      lk.unlock();
      ::close(p.fd);  // no EINTR retry: on Linux the descriptor is gone either way
      lk.lock();
      c->queued_bytes -= p.bytes;
      ++c->closed;
      c->done.notify_all();
    }
  }
}

void lock_for_fork() { closer()->m.lock(); }
void unlock_in_parent() { closer()->m.unlock(); }
void reset_in_child() {
  // The parent's thread does not exist here; the queued descriptors are
  // this child's copies: close them so the child does not keep the
  // parent's removed files alive.
  Closer* c = closer();
  for (const Pending& p : c->queue) ::close(p.fd);
  c->queue.clear();
  c->closed = c->handed;  // the one in flight at the fork too: nothing is left to wait for
  c->queued_bytes = 0;
  c->started = false;
  c->sleeping = false;
  c->lingering = false;
  c->held = false;
  // The parent's closer thread may have been waiting on these; it does
  // not exist here, so the child starts them afresh instead of reusing
  // state that still counts that waiter (the old ones are abandoned).
  new (&c->work) std::condition_variable;
  new (&c->done) std::condition_variable;
  c->m.unlock();
}

// Never destroyed: the detached thread may outlive static destruction.
Closer* closer() {
  static Closer* c = [] {
    auto* fresh = new Closer;
    pthread_atfork(lock_for_fork, unlock_in_parent, reset_in_child);
    return fresh;
  }();
  return c;
}

}  // namespace

void close_in_background(int fd, int64_t bytes) noexcept {
  if (fd < 0) return;
  Closer* c = closer();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(c->m);
    const bool room = c->queue.empty() ||
                      (c->queue.size() < kMaxPendingCloses && c->queued_bytes + bytes <= kMaxPendingCloseBytes);
    if (room && !c->started) {
      try {
        std::thread(run, c).detach();
        c->started = true;
      } catch (...) {
        // No thread: this one closes.
      }
    }
    if (room && c->started) {
      try {
        c->queue.push_back(Pending{fd, bytes});
        c->queued_bytes += bytes;
        ++c->handed;
        wake = c->sleeping || (c->lingering && c->full());
        fd = -1;
      } catch (...) {
        // No memory for the queue: this thread closes.
      }
    }
  }
  if (wake) c->work.notify_one();
  if (fd >= 0) ::close(fd);
}

void hold_background_closes(bool hold) noexcept {
  Closer* c = closer();
  {
    std::lock_guard<std::mutex> lk(c->m);
    c->held = hold;
  }
  c->work.notify_one();
}

void wait_background_closes() noexcept {
  Closer* c = closer();
  std::unique_lock<std::mutex> lk(c->m);
  const unsigned long long target = c->handed;
  c->done.wait(lk, [&] { return c->closed >= target; });
}

}  // namespace sw

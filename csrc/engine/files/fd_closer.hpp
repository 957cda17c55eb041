// Closing file descriptors on one background thread. The last close of a
// removed file frees its page cache (about as costly as reading the file);
// a released FileBacked unlinks its file at once and hands that close here,
// so its caller pays for the unlink only.
//
// - One thread, closing in order, not the executor's pool: a burst of
//   releases made the pool start a thread per queued close (no worker was
//   idle yet), and several closers at once.
// - The thread runs as SCHED_BATCH: a woken normal thread preempts the one
//   that handed it work, and on a busy machine that caller then waits a
//   whole time slice behind other processes (measured: 256 KiB File->CPU
//   moves took 10x as long).
// - Bounded: past kMaxPendingCloses descriptors or kMaxPendingCloseBytes of
//   file data waiting, the caller closes its own (a starved closer never
//   runs the process out of descriptors nor pins much page cache); an empty
//   queue always takes one.
// - After the first descriptor it waits up to 1 ms for more (a batch of 16
//   or 8 MiB ends the wait), so a burst of releases costs one wake-up.
// - Starts lazily, detached, its state never destroyed (no join at exit).
//   In a forked child the queue starts empty: the child closes its copies
//   of the descriptors still queued at the fork. The one descriptor being
//   closed at that moment stays open in the child until it exits or execs
//   (FileBacked descriptors are close-on-exec): closing it there could hit
//   a descriptor the parent opened under the same number meanwhile.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sw {

constexpr size_t kMaxPendingCloses = 64;
constexpr int64_t kMaxPendingCloseBytes = int64_t(256) << 20;

// Closes fd (of a file of `bytes` bytes, for the bound) on the background
// thread, or on this thread when the queue is full or no thread can be
// started. Never throws.
void close_in_background(int fd, int64_t bytes) noexcept;

// Blocks until every descriptor handed over before the call is closed
// (never while the closer is held).
void wait_background_closes() noexcept;

// Tests: while held, the closer takes nothing off its queue (the bounds
// still apply: past them the caller closes its own).
void hold_background_closes(bool hold) noexcept;

}  // namespace sw

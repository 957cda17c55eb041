// Decisions move_async makes from plain facts about a move: whether the
// destination is big enough (or can grow), where the transfer runs (on the
// calling thread, on a worker committing through the commit lane, or on a
// worker of its own), and how long a wait may block.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "runtime/executor.hpp"
#include "transfer/copy_plan.hpp"

namespace sw::movement {

// The last row of the validation table. True when an empty destination
// must grow to cosize first, false when it fits. Throws std::invalid_argument
// naming dest_type when it is too small (and, when empty, cannot grow).
bool needs_growth(const char* dest_type, int64_t dest_size, int64_t cosize, bool can_grow);
// The message of a destination that is empty and cannot allocate cosize.
std::invalid_argument too_small_empty(const char* dest_type, int64_t cosize);

// What decides where a move's transfer runs.
struct RouteFacts {
  bool native = false;        // the copy runs as a native plan
  bool profiled = false;      // a profiling session records the move
  bool blocking = false;      // move() rather than move_async()
  bool src_host = false;      // the carriers are exact built-in host (CPU)
  bool dst_host = false;
  bool src_builtin = false;   // ... or exact built-in native (CPU, FileBacked)
  bool dst_builtin = false;
  CopyPlanKind plan_kind = CopyPlanKind::None;
  int64_t plan_bytes = 0;
};

// A native copy of at most this size between host buffers completes inside
// move_async: cheaper than the hand-off to a worker.
constexpr int64_t kAsyncInlineBytes = int64_t(32) << 10;

// True when the copy completes on the calling thread: nothing in it can
// block on another thread or run user code (exact built-in carriers, whose
// release is native), nobody profiles (a profiled move shows its completion
// on a worker), and either the caller waits anyway or the copy is a small
// one between host buffers (no I/O, no size-dependent wait).
bool completes_inline(const RouteFacts& f);
// True when a worker's commit runs no user code (a native copy between
// exact built-in carriers), so it can go through the commit lane.
bool commits_in_lane(const RouteFacts& f);

// A wait's deadline from a timeout in seconds. Throws std::invalid_argument
// for a negative or NaN timeout.
int64_t timeout_deadline(int64_t now_ns, double secs);

enum class WaitOutcome { Done, TimedOut, Interrupted };

// Waits for c until it is done or deadline_ns (< 0: none) passed, in slices
// of at most slice. wait_step(step) waits up to step (the caller releases
// its locks around it) and returns whether c is done; keep_waiting() runs
// between slices and ends the wait (Interrupted) when it returns false. The
// thread counts as blocked for the executor meanwhile (a worker waiting on
// nested work lets the pool start another).
WaitOutcome wait_in_slices(const Completion& c, int64_t deadline_ns, std::chrono::nanoseconds slice,
                           const std::function<bool(std::chrono::nanoseconds)>& wait_step,
                           const std::function<bool()>& keep_waiting);

}  // namespace sw::movement

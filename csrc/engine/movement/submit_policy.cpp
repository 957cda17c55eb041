#include "movement/submit_policy.hpp"

#include <cstdio>
#include <stdexcept>

#include "movement/job_tracker.hpp"
#include "runtime/clock.hpp"

namespace sw::movement {

std::invalid_argument too_small_empty(const char* dest_type, int64_t cosize) {
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "destination %s carrier is too small: it is empty and cannot allocate the layout cosize of %lld",
                dest_type, static_cast<long long>(cosize));
  return std::invalid_argument(msg);
}

bool needs_growth(const char* dest_type, int64_t dest_size, int64_t cosize, bool can_grow) {
  if (dest_size >= cosize) return false;
  if (dest_size == 0 && can_grow) return true;
  if (dest_size == 0) throw too_small_empty(dest_type, cosize);
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "destination %s carrier is too small: %lld slots for a layout cosize of %lld, and only an empty "
                "destination can be allocated",
                dest_type, static_cast<long long>(dest_size), static_cast<long long>(cosize));
  throw std::invalid_argument(msg);
}

bool completes_inline(const RouteFacts& f) {
  if (!f.native || f.profiled) return false;
  if (f.blocking) return f.src_builtin && f.dst_builtin;
  return f.src_host && f.dst_host &&
         (f.plan_kind == CopyPlanKind::HostToHost || f.plan_kind == CopyPlanKind::HostStrided) &&
         f.plan_bytes <= kAsyncInlineBytes;
}

bool commits_in_lane(const RouteFacts& f) { return f.native && f.src_builtin && f.dst_builtin; }

int64_t timeout_deadline(int64_t now, double secs) {
  if (!(secs >= 0.0)) throw std::invalid_argument("timeout must be a non-negative number or None");
  return deadline_after(now, secs);
}

WaitOutcome wait_in_slices(const Completion& c, int64_t deadline_ns, std::chrono::nanoseconds slice,
                           const std::function<bool(std::chrono::nanoseconds)>& wait_step,
                           const std::function<bool()>& keep_waiting) {
  if (c.done()) return WaitOutcome::Done;
  BlockingScope blocking;
  for (;;) {
    if (c.done()) return WaitOutcome::Done;
    std::chrono::nanoseconds step = slice;
    if (deadline_ns >= 0) {
      const int64_t left = deadline_ns - now_ns();
      if (left <= 0) return WaitOutcome::TimedOut;
      if (std::chrono::nanoseconds(left) < step) step = std::chrono::nanoseconds(left);
    }
    if (wait_step(step)) return WaitOutcome::Done;
    if (!keep_waiting()) return WaitOutcome::Interrupted;
  }
}

}  // namespace sw::movement

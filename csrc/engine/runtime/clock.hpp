// Monotonic nanosecond clock used by profiling.
#pragma once
#include <chrono>
#include <cstdint>

namespace sw {
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace sw

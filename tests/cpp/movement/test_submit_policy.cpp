#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "movement/submit_policy.hpp"
#include "runtime/clock.hpp"
#include "runtime/executor.hpp"

using namespace std::chrono_literals;
using sw::CopyPlanKind;
using sw::movement::RouteFacts;
using sw::movement::WaitOutcome;

TEST(Capacity, FitsGrowsOrRaises) {
  EXPECT_FALSE(sw::movement::needs_growth("CPU", 10, 10, false));
  EXPECT_FALSE(sw::movement::needs_growth("CPU", 12, 10, true));
  EXPECT_TRUE(sw::movement::needs_growth("FileBacked", 0, 10, true));
  try {
    sw::movement::needs_growth("CPU", 0, 10, false);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "destination CPU carrier is too small: it is empty and cannot allocate the layout cosize of 10");
  }
  try {
    sw::movement::needs_growth("FileBacked", 3, 10, true);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "destination FileBacked carrier is too small: 3 slots for a layout cosize of 10, and only an "
                 "empty destination can be allocated");
  }
  EXPECT_STREQ(sw::movement::too_small_empty("X", 4).what(),
               "destination X carrier is too small: it is empty and cannot allocate the layout cosize of 4");
}

namespace {
RouteFacts host_copy(int64_t bytes) {
  RouteFacts f;
  f.native = true;
  f.src_host = f.dst_host = f.src_builtin = f.dst_builtin = true;
  f.plan_kind = CopyPlanKind::HostToHost;
  f.plan_bytes = bytes;
  return f;
}
}  // namespace

TEST(RoutePolicy, SmallHostCopiesCompleteInline) {
  EXPECT_TRUE(sw::movement::completes_inline(host_copy(1024)));
  EXPECT_TRUE(sw::movement::completes_inline(host_copy(sw::movement::kAsyncInlineBytes)));
  EXPECT_FALSE(sw::movement::completes_inline(host_copy(sw::movement::kAsyncInlineBytes + 1)));
  RouteFacts strided = host_copy(64);
  strided.plan_kind = CopyPlanKind::HostStrided;
  EXPECT_TRUE(sw::movement::completes_inline(strided));
  RouteFacts profiled = host_copy(64);
  profiled.profiled = true;
  EXPECT_FALSE(sw::movement::completes_inline(profiled));
  RouteFacts python = host_copy(64);
  python.native = false;
  EXPECT_FALSE(sw::movement::completes_inline(python));
}

TEST(RoutePolicy, BlockingMovesCompleteInlineBetweenBuiltins) {
  RouteFacts f = host_copy(int64_t(1) << 30);
  f.blocking = true;
  EXPECT_TRUE(sw::movement::completes_inline(f));
  f.src_host = false;  // FileBacked -> CPU
  f.plan_kind = CopyPlanKind::FileToHost;
  EXPECT_TRUE(sw::movement::completes_inline(f));
  f.blocking = false;  // I/O never completes inside move_async
  EXPECT_FALSE(sw::movement::completes_inline(f));
  f.blocking = true;
  f.src_builtin = false;  // a subclass: its release may run user code
  EXPECT_FALSE(sw::movement::completes_inline(f));
}

TEST(RoutePolicy, LaneTakesNativeCopiesBetweenBuiltins) {
  RouteFacts f = host_copy(1 << 20);
  EXPECT_TRUE(sw::movement::commits_in_lane(f));
  f.dst_builtin = false;
  EXPECT_FALSE(sw::movement::commits_in_lane(f));
  f = host_copy(1 << 20);
  f.native = false;
  EXPECT_FALSE(sw::movement::commits_in_lane(f));
}

TEST(Timeout, DeadlineOrInvalid) {
  EXPECT_EQ(sw::movement::timeout_deadline(1000, 0.0), 1000);
  EXPECT_EQ(sw::movement::timeout_deadline(1000, 2.0), 1000 + 2'000'000'000);
  EXPECT_THROW(sw::movement::timeout_deadline(0, -0.5), std::invalid_argument);
  try {
    sw::movement::timeout_deadline(0, std::nan(""));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "timeout must be a non-negative number or None");
  }
}

namespace {
auto plain_step(const sw::Completion& c) {
  return [&c](std::chrono::nanoseconds step) { return c.wait_for(step); };
}
auto always = [] { return true; };
}  // namespace

TEST(WaitInSlices, DoneAtOnceWithoutWaiting) {
  sw::Completion c;
  c.set();
  int steps = 0;
  EXPECT_EQ(sw::movement::wait_in_slices(
                c, -1, 100ms, [&](std::chrono::nanoseconds) { return ++steps, true; }, always),
            WaitOutcome::Done);
  EXPECT_EQ(steps, 0);
}

TEST(WaitInSlices, WaitsForTheCompletion) {
  sw::Completion c;
  std::thread setter([&] {
    std::this_thread::sleep_for(30ms);
    c.set();
  });
  int between = 0;
  EXPECT_EQ(sw::movement::wait_in_slices(c, -1, 5ms, plain_step(c), [&] { return ++between, true; }),
            WaitOutcome::Done);
  setter.join();
  EXPECT_GE(between, 1);  // woke between slices
}

TEST(WaitInSlices, TimesOutAtTheDeadline) {
  sw::Completion c;
  const int64_t start = sw::now_ns();
  EXPECT_EQ(sw::movement::wait_in_slices(c, start + 40'000'000, 100ms, plain_step(c), always),
            WaitOutcome::TimedOut);
  const int64_t waited = sw::now_ns() - start;
  EXPECT_GE(waited, 40'000'000);
  EXPECT_LT(waited, 2'000'000'000);  // the last slice is cut to the deadline
}

TEST(WaitInSlices, InterruptedBetweenSlices) {
  sw::Completion c;
  int between = 0;
  EXPECT_EQ(sw::movement::wait_in_slices(c, -1, 1ms, plain_step(c), [&] { return ++between < 3; }),
            WaitOutcome::Interrupted);
  EXPECT_EQ(between, 3);
}

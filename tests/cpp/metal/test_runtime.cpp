// sw::metal: the process runtime slot and the FakeRuntime tests rely on
// (deferred copies, call log, failure injection, held synchronization).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "metal/fake_runtime.hpp"

using sw::metal::DeviceError;
using sw::metal::FakeRuntime;
using Call = FakeRuntime::Call;

TEST(MetalRuntime, NoneInstalledByDefaultAndInstallRemoves) {
  EXPECT_EQ(sw::metal::current_runtime(), nullptr);
  auto fake = std::make_shared<FakeRuntime>();
  sw::metal::install_runtime(fake);
  EXPECT_EQ(sw::metal::current_runtime(), fake);
  sw::metal::install_runtime(nullptr);
  EXPECT_EQ(sw::metal::current_runtime(), nullptr);
}

TEST(MetalRuntime, CopiesCompleteOnlyAtSynchronize) {
  FakeRuntime rt;
  auto buf = rt.allocate(16, true);
  float in[4] = {1, 2, 3, 4};
  rt.copy_to_device(buf, 0, in, sizeof in);
  std::memset(in, 0, sizeof in);  // staged: reusing the source is safe
  float out[4] = {-1, -1, -1, -1};
  rt.copy_to_host(out, buf, 0, sizeof out);
  EXPECT_EQ(rt.pending(), 2u);
  EXPECT_EQ(out[0], -1);  // nothing ran yet
  rt.synchronize();
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[3], 4);
  auto log = rt.log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].call, Call::Allocate);
  EXPECT_EQ(log[1].call, Call::CopyToDevice);
  EXPECT_EQ(log[2].call, Call::CopyToHost);
  EXPECT_EQ(log[3].call, Call::Synchronize);
  EXPECT_EQ(log[3].bytes, 2u);  // commands it completed
}

TEST(MetalRuntime, DeviceCopyAndPeek) {
  FakeRuntime rt;
  auto a = rt.allocate(8, true), b = rt.allocate(8, true);
  int32_t in[2] = {7, 9};
  rt.copy_to_device(a, 0, in, 8);
  rt.copy_device(b, 4, a, 0, 4);
  rt.synchronize();
  int32_t got[2];
  ASSERT_TRUE(rt.peek(b, 0, got, 8));
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 7);
  EXPECT_FALSE(rt.peek(b, 4, got, 8));  // out of range
  EXPECT_EQ(rt.live_buffers(), 2u);
  rt.free(a);
  rt.free(b);
  EXPECT_EQ(rt.live_buffers(), 0u);
  EXPECT_EQ(rt.unsafe_frees(), 0u);
}

TEST(MetalRuntime, RangeAndUnknownBufferFail) {
  FakeRuntime rt;
  auto a = rt.allocate(4, true);
  char host[8] = {};
  EXPECT_THROW(rt.copy_to_device(a, 2, host, 4), DeviceError);
  EXPECT_THROW(rt.copy_to_host(host, a + 100, 0, 1), DeviceError);
  EXPECT_EQ(rt.pending(), 0u);
}

TEST(MetalRuntime, InjectedFailuresHitTheChosenCall) {
  FakeRuntime rt;
  rt.fail_next(Call::Allocate, 1);
  auto a = rt.allocate(4, true);  // skipped
  EXPECT_THROW(rt.allocate(4, true), DeviceError);
  EXPECT_NO_THROW(rt.allocate(4, true));  // one failure only
  char host[4] = {1, 2, 3, 4};
  rt.fail_next(Call::CopyToDevice);
  EXPECT_THROW(rt.copy_to_device(a, 0, host, 4), DeviceError);
  EXPECT_EQ(rt.pending(), 0u);
  rt.copy_to_device(a, 0, host, 4);
  rt.fail_next(Call::Synchronize);
  EXPECT_THROW(rt.synchronize(), DeviceError);
  EXPECT_EQ(rt.pending(), 0u);  // abandoned
  char out[4] = {};
  ASSERT_TRUE(rt.peek(a, 0, out, 4));
  EXPECT_EQ(out[0], 0);  // the abandoned copy never ran
  auto log = rt.log();
  EXPECT_FALSE(log.back().ok);
  EXPECT_EQ(log.back().call, Call::Synchronize);
}

TEST(MetalRuntime, FreeWithPendingWorkIsCounted) {
  FakeRuntime rt;
  auto a = rt.allocate(4, true);
  char host[4] = {};
  rt.copy_to_host(host, a, 0, 4);
  rt.free(a);
  EXPECT_EQ(rt.unsafe_frees(), 1u);
  EXPECT_NO_THROW(rt.synchronize());  // the orphaned command is skipped
}

TEST(MetalRuntime, HeldSynchronizeBlocksUntilReleased) {
  FakeRuntime rt;
  auto a = rt.allocate(4, true);
  int32_t v = 5, out = 0;
  rt.copy_to_device(a, 0, &v, 4);
  rt.copy_to_host(&out, a, 0, 4);
  rt.hold_synchronize(true);
  std::thread t([&] { rt.synchronize(); });
  ASSERT_TRUE(rt.wait_synchronizing(5000));
  EXPECT_EQ(rt.pending(), 2u);
  rt.hold_synchronize(false);
  t.join();
  EXPECT_EQ(out, 5);
  EXPECT_FALSE(rt.wait_synchronizing(1));
}

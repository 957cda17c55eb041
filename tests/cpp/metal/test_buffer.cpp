// sw::metal::Buffer and the Metal step sequences: allocation rules, slot
// reads (synchronized) and writes (enqueued), the bulk fill, span copies in
// the three directions with their bounds and runtime rules, named step
// failures, and release that synchronizes before freeing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "metal/buffer.hpp"
#include "metal/fake_runtime.hpp"

namespace M = sw::metal;
using Call = M::FakeRuntime::Call;

namespace {

std::vector<Call> calls(const M::FakeRuntime& rt) {
  std::vector<Call> out;
  for (const auto& e : rt.log()) out.push_back(e.call);
  return out;
}

TEST(MetalBuffer, AllocateZeroFilledAndEmpty) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer b = M::Buffer::allocate(rt, 4, 4, true);
  EXPECT_NE(b.id(), 0u);
  EXPECT_EQ(b.size(), 4);
  EXPECT_EQ(b.runtime(), rt);
  int32_t out[4] = {1, 1, 1, 1};
  ASSERT_TRUE(rt->peek(b.id(), 0, out, sizeof out));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[3], 0);
  // An empty buffer keeps its runtime but has no device storage.
  M::Buffer e = M::Buffer::allocate(rt, 0, 4, true);
  EXPECT_EQ(e.id(), 0u);
  EXPECT_EQ(e.runtime(), rt);
  EXPECT_EQ(rt->live_buffers(), 1u);
}

TEST(MetalBuffer, AllocateRules) {
  auto rt = std::make_shared<M::FakeRuntime>();
  EXPECT_THROW(M::Buffer::allocate(rt, -1, 4, true), std::invalid_argument);
  EXPECT_THROW(M::Buffer::allocate(rt, INT64_MAX, 4, true), std::bad_alloc);
  rt->fail_next(Call::Allocate);
  try {
    M::Buffer::allocate(rt, 2, 4, true);
    FAIL();
  } catch (const M::StepError& e) {
    EXPECT_STREQ(e.step(), "allocation");
  }
  EXPECT_EQ(rt->live_buffers(), 0u);
}

TEST(MetalBuffer, SlotWriteIsEnqueuedAndReadSynchronizes) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer b = M::Buffer::allocate(rt, 3, 4, true);
  rt->clear_log();
  const float v = 2.5f;
  M::write_slot(b.view(), 1, &v);
  EXPECT_EQ(rt->pending(), 1u);
  float got = 0;
  M::read_slot(b.view(), 1, &got);
  EXPECT_EQ(got, 2.5f);
  EXPECT_EQ(rt->pending(), 0u);
  EXPECT_EQ(calls(*rt), (std::vector<Call>{Call::CopyToDevice, Call::CopyToHost, Call::Synchronize}));
}

TEST(MetalBuffer, BulkFillFromSlotZero) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer b = M::Buffer::allocate(rt, 3, 4, false);
  const int32_t in[3] = {4, 5, 6};
  M::write_slots(b.view(), in, 3);
  rt->synchronize();
  int32_t out[3] = {};
  ASSERT_TRUE(rt->peek(b.id(), 0, out, sizeof out));
  EXPECT_EQ(out[2], 6);
  rt->clear_log();
  M::write_slots(b.view(), in, 0);  // nothing to copy: no device call
  EXPECT_TRUE(rt->log().empty());
}

TEST(MetalBuffer, FailedStepsAreNamed) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer b = M::Buffer::allocate(rt, 2, 4, true);
  float out = 0;
  rt->fail_next(Call::Synchronize);
  try {
    M::read_slot(b.view(), 0, &out);
    FAIL();
  } catch (const M::StepError& e) {
    EXPECT_STREQ(e.step(), "synchronization");
  }
  rt->fail_next(Call::CopyToDevice);
  try {
    M::write_slot(b.view(), 0, &out);
    FAIL();
  } catch (const M::StepError& e) {
    EXPECT_STREQ(e.step(), "copy to device");
  }
}

TEST(MetalBuffer, SpanCopiesInEveryDirection) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer a = M::Buffer::allocate(rt, 4, 4, true);
  M::Buffer b = M::Buffer::allocate(rt, 4, 4, true);
  int32_t host[4] = {1, 2, 3, 4};
  // Host slots [1, 3) -> device slots [2, 4).
  M::copy_span(M::SpanEnd::on_host(host, 4, 1), M::SpanEnd::on_device(a.view(), 4, 2), 2, 4);
  EXPECT_EQ(rt->pending(), 0u);  // synchronized before returning
  // Device -> device, then device -> host.
  M::copy_span(M::SpanEnd::on_device(a.view(), 4, 0), M::SpanEnd::on_device(b.view(), 4, 0), 4, 4);
  int32_t back[4] = {-1, -1, -1, -1};
  M::copy_span(M::SpanEnd::on_device(b.view(), 4, 0), M::SpanEnd::on_host(back, 4, 0), 4, 4);
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(back[1], 0);
  EXPECT_EQ(back[2], 2);
  EXPECT_EQ(back[3], 3);
  const auto log = calls(*rt);
  EXPECT_EQ(std::count(log.begin(), log.end(), Call::CopyDevice), 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), Call::Synchronize), 3);
}

TEST(MetalBuffer, SpanCopyRules) {
  auto rt = std::make_shared<M::FakeRuntime>();
  auto other = std::make_shared<M::FakeRuntime>();
  M::Buffer a = M::Buffer::allocate(rt, 4, 4, true);
  M::Buffer b = M::Buffer::allocate(other, 4, 4, true);
  int32_t host[4] = {};
  const auto dev = M::SpanEnd::on_device(a.view(), 4, 0);
  EXPECT_THROW(M::copy_span(M::SpanEnd::on_host(host, 4, 1), dev, 4, 4), std::invalid_argument);
  EXPECT_THROW(M::copy_span(M::SpanEnd::on_host(host, 4, -1), dev, 1, 4), std::invalid_argument);
  EXPECT_THROW(M::copy_span(M::SpanEnd::on_host(host, 4, 0), dev, -1, 4), std::invalid_argument);
  EXPECT_THROW(M::copy_span(dev, M::SpanEnd::on_host(host, 2, 0), 3, 4), std::invalid_argument);
  try {
    M::copy_span(dev, M::SpanEnd::on_device(b.view(), 4, 0), 1, 4);
    FAIL();
  } catch (const M::StepError&) {
    FAIL() << "runtimes are compared before any step";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "Metal carriers of different runtimes cannot copy to each other");
  }
  // Nothing to copy: no runtime check and no device call.
  rt->clear_log();
  M::copy_span(dev, M::SpanEnd::on_device(b.view(), 4, 0), 0, 4);
  EXPECT_TRUE(rt->log().empty());
  rt->fail_next(Call::CopyToHost);
  try {
    M::copy_span(dev, M::SpanEnd::on_host(host, 4, 0), 1, 4);
    FAIL();
  } catch (const M::StepError& e) {
    EXPECT_STREQ(e.step(), "copy to host");
  }
}

TEST(MetalBuffer, FreeSynchronizesFirstAndIsIdempotent) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer b = M::Buffer::allocate(rt, 2, 4, true);
  const float v = 1;
  M::write_slot(b.view(), 0, &v);
  b.free();
  EXPECT_EQ(rt->unsafe_frees(), 0u);
  EXPECT_EQ(rt->live_buffers(), 0u);
  EXPECT_EQ(b.runtime(), nullptr);
  EXPECT_EQ(b.size(), 0);
  b.free();
  // A failed synchronization abandons the work; the buffer is freed anyway.
  M::Buffer c = M::Buffer::allocate(rt, 2, 4, true);
  M::write_slot(c.view(), 0, &v);
  rt->fail_next(Call::Synchronize);
  c.free();
  EXPECT_EQ(rt->live_buffers(), 0u);
}

TEST(MetalBuffer, MovesTransferOwnership) {
  auto rt = std::make_shared<M::FakeRuntime>();
  M::Buffer a = M::Buffer::allocate(rt, 2, 4, true);
  const M::BufferId id = a.id();
  M::Buffer b = std::move(a);
  EXPECT_EQ(a.id(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.id(), id);
  {
    M::Buffer c = M::Buffer::allocate(rt, 1, 4, true);
    c = std::move(b);  // frees c's own buffer first
    EXPECT_EQ(rt->live_buffers(), 1u);
  }
  EXPECT_EQ(rt->live_buffers(), 0u);
}

}  // namespace

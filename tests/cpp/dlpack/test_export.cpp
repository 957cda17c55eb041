// Engine DLPack construction: struct contents for both kinds, leaf-mode
// flattening, flags, dtype mapping, deleter frees once and releases the owner
// once (also from another thread).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "dlpack/export.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::Layout;
namespace dl = sw::dlpack;
using swtest::Owner;
using swtest::release_counting;

namespace {

dl::ExportSpec spec_for(const Layout& l, void* data, uint64_t byte_offset = 0) {
  dl::ExportSpec s;
  s.data = data;
  s.leaves = l.leaves();
  s.byte_offset = byte_offset;
  return s;
}

}  // namespace

TEST(DLPackExport, DtypeMapping) {
  DLDataType t{};
  ASSERT_TRUE(dl::dl_dtype_for(sw::DTypeCode::Float32, &t));
  EXPECT_EQ(t.code, kDLFloat);
  EXPECT_EQ(t.bits, 32);
  EXPECT_EQ(t.lanes, 1);
  ASSERT_TRUE(dl::dl_dtype_for(sw::DTypeCode::Int32, &t));
  EXPECT_EQ(t.code, kDLInt);
  EXPECT_EQ(t.bits, 32);
  EXPECT_EQ(t.lanes, 1);
  for (auto c : {sw::DTypeCode::Any, sw::DTypeCode::Floating, sw::DTypeCode::Integer, sw::DTypeCode::Float64,
                 sw::DTypeCode::Bool, sw::DTypeCode::Compound})
    EXPECT_FALSE(dl::dl_dtype_for(c, &t)) << static_cast<int>(c);
}

TEST(DLPackExport, LegacyFlattensNestedLeavesInOrder) {
  // [2,[3,4]] : [1,[2,6]] -> three dims, strides verbatim.
  Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  float storage[64];
  Owner owner;
  dl::ExportSpec s = spec_for(l, storage, 5 * 4);
  s.device = DLDevice{kDLCPU, 0};
  s.dtype = DLDataType{kDLFloat, 32, 1};
  s.read_only = true;  // legacy has no flags word: must not matter
  DLManagedTensor* m = dl::make_legacy(s, &owner, release_counting);
  ASSERT_NE(m, nullptr);
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.data, storage);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.device.device_id, 0);
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.byte_offset, 20u);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  ASSERT_NE(t.shape, nullptr);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + 3), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(std::vector<int64_t>(t.strides, t.strides + 3), (std::vector<int64_t>{1, 2, 6}));
  auto* ctx = static_cast<dl::ExportContext*>(m->manager_ctx);
  EXPECT_EQ(ctx->owner, &owner);
  EXPECT_EQ(ctx->shape, t.shape);
  EXPECT_EQ(ctx->strides, t.strides);
  EXPECT_EQ(ctx->ndim, 3);
  EXPECT_EQ(m->deleter, &dl::sw_dlpack_legacy_deleter);
  m->deleter(m);
  EXPECT_EQ(owner.releases.load(), 1);
}

TEST(DLPackExport, VersionedIsExactlyOneZeroWithFlags) {
  Layout l(N({L(4), L(2)}), N({L(2), L(1)}));
  int32_t storage[8];
  for (bool ro : {false, true}) {
    Owner owner;
    dl::ExportSpec s = spec_for(l, storage);
    s.dtype = DLDataType{kDLInt, 32, 1};
    s.read_only = ro;
    DLManagedTensorVersioned* m = dl::make_versioned(s, &owner, release_counting);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->version.major, 1u);
    EXPECT_EQ(m->version.minor, 0u);
    EXPECT_EQ(m->flags, ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0u);
    EXPECT_EQ(m->dl_tensor.ndim, 2);
    EXPECT_EQ(m->dl_tensor.dtype.code, kDLInt);
    EXPECT_EQ(m->dl_tensor.shape[0], 4);
    EXPECT_EQ(m->dl_tensor.shape[1], 2);
    EXPECT_EQ(m->dl_tensor.strides[0], 2);
    EXPECT_EQ(m->dl_tensor.strides[1], 1);
    EXPECT_EQ(m->deleter, &dl::sw_dlpack_versioned_deleter);
    m->deleter(m);
    EXPECT_EQ(owner.releases.load(), 1);
  }
}

TEST(DLPackExport, BroadcastAndExtentOneLeavesUnchanged) {
  // [2,1,3] : [0,7,1]: stride 0 and the extent-1 stride survive verbatim.
  Layout l(N({L(2), L(1), L(3)}), N({L(0), L(7), L(1)}));
  float storage[4];
  DLManagedTensorVersioned* m = dl::make_versioned(spec_for(l, storage), nullptr, nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.shape, m->dl_tensor.shape + 3), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 3),
            (std::vector<int64_t>{0, 7, 1}));
  m->deleter(m);  // null release callback: nothing to release
}

TEST(DLPackExport, RankZeroHasNdimZeroAndValidPointers) {
  Layout l(N({}), N({}));
  float storage[1];
  Owner owner;
  DLManagedTensor* m = dl::make_legacy(spec_for(l, storage), &owner, release_counting);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  EXPECT_NE(m->dl_tensor.shape, nullptr);
  EXPECT_NE(m->dl_tensor.strides, nullptr);
  m->deleter(m);
  EXPECT_EQ(owner.releases.load(), 1);
}

TEST(DLPackExport, DeviceCopiedVerbatim) {
  Layout l(N({L(3)}), N({L(1)}));
  dl::ExportSpec s = spec_for(l, reinterpret_cast<void*>(uintptr_t{0x1000}));
  s.device = DLDevice{kDLCUDA, 3};
  DLManagedTensorVersioned* m = dl::make_versioned(s, nullptr, nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 3);
  m->deleter(m);
}

TEST(DLPackExport, ManyLeavesRoundTrip) {
  std::vector<IntTree> sh, st;
  int64_t stride = 1;
  for (int i = 0; i < 40; ++i) {
    sh.push_back(L(1 + i % 2));
    st.push_back(L(stride));
    stride *= 1 + i % 2;
  }
  Layout l(N(sh), N(st));
  float storage[1];
  DLManagedTensor* m = dl::make_legacy(spec_for(l, storage), nullptr, nullptr);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->dl_tensor.ndim, 40);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(m->dl_tensor.shape[i], l.leaves()[i].extent);
    EXPECT_EQ(m->dl_tensor.strides[i], l.leaves()[i].stride);
  }
  m->deleter(m);
}

TEST(DLPackExport, DeleterRunsOnAnotherThreadOncePerTensor) {
  Layout l(N({L(8)}), N({L(1)}));
  float storage[8];
  Owner owner;
  std::vector<DLManagedTensorVersioned*> ms;
  for (int i = 0; i < 64; ++i) ms.push_back(dl::make_versioned(spec_for(l, storage), &owner, release_counting));
  std::thread th([&] {
    for (auto* m : ms) m->deleter(m);
  });
  th.join();
  EXPECT_EQ(owner.releases.load(), 64);
}

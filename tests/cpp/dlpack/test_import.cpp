// DLPack import decisions (dlpack/import.hpp): which DLTensors a CPU carrier
// views in place, which a copy resolves, which are refused; the leaves, the
// row-major copy, and the managed tensor's deleter running exactly once.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dlpack/import.hpp"
#include "storage/aligned_buffer.hpp"

namespace {

namespace dl = sw::dlpack;
using dl::ImportCheck;
using sw::DTypeCode;
using sw::LeafMode;

DLTensor tensor(void* data, std::vector<int64_t>& shape, int64_t* strides, DLDataType dtype = {kDLFloat, 32, 1},
                DLDeviceType device = kDLCPU, uint64_t byte_offset = 0) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{device, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  t.strides = strides;
  t.byte_offset = byte_offset;
  return t;
}

TEST(DlpackImport, DtypesMapToStorageDtypes) {
  DTypeCode c{};
  EXPECT_TRUE(dl::storage_dtype_for({kDLFloat, 32, 1}, &c));
  EXPECT_EQ(c, DTypeCode::Float32);
  EXPECT_TRUE(dl::storage_dtype_for({kDLInt, 32, 1}, &c));
  EXPECT_EQ(c, DTypeCode::Int32);
  EXPECT_TRUE(dl::storage_dtype_for({kDLBool, 8, 1}, &c));
  EXPECT_EQ(c, DTypeCode::Bool);
  for (DLDataType t : {DLDataType{kDLFloat, 64, 1}, DLDataType{kDLFloat, 32, 4}, DLDataType{kDLUInt, 32, 1},
                       DLDataType{kDLInt, 64, 1}, DLDataType{kDLBfloat, 16, 1}, DLDataType{kDLUInt, 8, 1}})
    EXPECT_FALSE(dl::storage_dtype_for(t, &c));
  EXPECT_EQ(dl::dtype_text({kDLFloat, 64, 1}), "float64");
  EXPECT_EQ(dl::dtype_text({kDLUInt, 8, 1}), "uint8");
  EXPECT_EQ(dl::dtype_text({kDLBool, 8, 1}), "bool");
  EXPECT_EQ(dl::dtype_text({kDLFloat, 32, 4}), "float32x4");
  EXPECT_EQ(dl::dtype_text({kDLComplex, 64, 1}), "complex64");
  EXPECT_EQ(dl::dtype_text({kDLFloat8_e4m3fn, 8, 1}), "code 10, 8 bits");
  EXPECT_STREQ(dl::conversion_target({kDLInt, 64, 1}), "int32");
  EXPECT_STREQ(dl::conversion_target({kDLFloat, 64, 1}), "float32");
}

TEST(DlpackImport, HostDevices) {
  EXPECT_TRUE(dl::is_host_device(kDLCPU));
  EXPECT_TRUE(dl::is_host_device(kDLCUDAHost));
  EXPECT_TRUE(dl::is_host_device(kDLROCMHost));
  EXPECT_FALSE(dl::is_host_device(kDLCUDA));
  EXPECT_FALSE(dl::is_host_device(kDLMetal));
}

TEST(DlpackImport, StridedViewKeepsShapeStridesAndOffset) {
  alignas(64) float data[32] = {};
  std::vector<int64_t> shape = {2, 3};
  int64_t strides[] = {8, 2};
  const DLTensor t = tensor(data, shape, strides, {kDLFloat, 32, 1}, kDLCPU, 12);
  const dl::ImportView v = dl::inspect_import(t);
  EXPECT_EQ(v.check, ImportCheck::View);
  EXPECT_EQ(v.dtype, DTypeCode::Float32);
  EXPECT_EQ(v.size, 6);
  EXPECT_EQ(v.span, 1 + 8 + 2 * 2);
  EXPECT_EQ(v.first, reinterpret_cast<unsigned char*>(data) + 12);
  std::vector<LeafMode> leaves;
  dl::import_leaves(v, &leaves);
  EXPECT_EQ(leaves, (std::vector<LeafMode>{{2, 8}, {3, 2}}));
  const sw::Layout l = dl::flat_layout(leaves);
  EXPECT_EQ(l.cosize(), v.span);
  EXPECT_EQ(l.index_of_ordinal(1), 8);  // first mode fastest: (1, 0)
}

TEST(DlpackImport, NullStridesAreRowMajor) {
  int32_t data[24] = {};
  std::vector<int64_t> shape = {2, 3, 4};
  const dl::ImportView v = dl::inspect_import(tensor(data, shape, nullptr, {kDLInt, 32, 1}));
  EXPECT_EQ(v.check, ImportCheck::View);
  std::vector<LeafMode> leaves;
  dl::import_leaves(v, &leaves);
  EXPECT_EQ(leaves, (std::vector<LeafMode>{{2, 12}, {3, 4}, {4, 1}}));
  EXPECT_EQ(v.span, 24);
}

TEST(DlpackImport, RankZeroAndZeroSize) {
  float one = 2.5f;
  std::vector<int64_t> none;
  dl::ImportView v = dl::inspect_import(tensor(&one, none, nullptr));
  EXPECT_EQ(v.check, ImportCheck::View);
  EXPECT_EQ(v.size, 1);
  EXPECT_EQ(v.span, 1);
  std::vector<int64_t> empty = {0, 3};
  int64_t strides[] = {3, 1};
  v = dl::inspect_import(tensor(nullptr, empty, strides));  // null data is fine without elements
  EXPECT_EQ(v.check, ImportCheck::View);
  EXPECT_EQ(v.size, 0);
  EXPECT_EQ(v.span, 0);
  std::vector<LeafMode> leaves;
  dl::import_leaves(v, &leaves);
  EXPECT_EQ(dl::flat_layout(leaves).size(), 0);
  // Without elements, a negative stride reads nothing: still a view.
  int64_t reversed[] = {3, -1};
  v = dl::inspect_import(tensor(nullptr, empty, reversed));
  EXPECT_EQ(v.check, ImportCheck::View);
  dl::import_leaves(v, &leaves);
  EXPECT_EQ(leaves, (std::vector<LeafMode>{{0, 3}, {3, 0}}));
}

TEST(DlpackImport, WhatACopyResolves) {
  float data[8] = {};
  std::vector<int64_t> shape = {4};
  int64_t negative[] = {-1};
  dl::ImportView v = dl::inspect_import(tensor(data + 3, shape, negative));
  EXPECT_EQ(v.check, ImportCheck::NegativeStride);
  // A negative stride on an extent-1 mode moves nothing: viewable, read as 0.
  std::vector<int64_t> one = {1, 4};
  int64_t one_negative[] = {-4, 1};
  v = dl::inspect_import(tensor(data, one, one_negative));
  EXPECT_EQ(v.check, ImportCheck::View);
  std::vector<LeafMode> leaves;
  dl::import_leaves(v, &leaves);
  EXPECT_EQ(leaves, (std::vector<LeafMode>{{1, 0}, {4, 1}}));
  int64_t unit[] = {1};
  v = dl::inspect_import(tensor(data, shape, unit, {kDLFloat, 32, 1}, kDLCPU, 2));
  EXPECT_EQ(v.check, ImportCheck::Misaligned);
  v = dl::inspect_import(tensor(data, shape, unit, {kDLFloat, 32, 1}, kDLCUDA));
  EXPECT_EQ(v.check, ImportCheck::NotHost);
  v = dl::inspect_import(tensor(data, shape, unit, {kDLFloat, 32, 1}, kDLCUDAHost));
  EXPECT_EQ(v.check, ImportCheck::View);
}

TEST(DlpackImport, WhatIsRefused) {
  float data[4] = {};
  std::vector<int64_t> shape = {4};
  int64_t unit[] = {1};
  EXPECT_EQ(dl::inspect_import(tensor(data, shape, unit, {kDLFloat, 64, 1})).check, ImportCheck::Dtype);
  // The dtype wins over the device: no copy converts it.
  EXPECT_EQ(dl::inspect_import(tensor(data, shape, unit, {kDLFloat, 64, 1}, kDLCUDA)).check, ImportCheck::Dtype);
  std::vector<int64_t> negative_extent = {-2};
  dl::ImportView v = dl::inspect_import(tensor(data, negative_extent, unit));
  EXPECT_EQ(v.check, ImportCheck::Malformed);
  EXPECT_STREQ(v.malformed, "a negative extent");
  v = dl::inspect_import(tensor(nullptr, shape, unit));
  EXPECT_EQ(v.check, ImportCheck::Malformed);
  DLTensor no_shape = tensor(data, shape, unit);
  no_shape.shape = nullptr;
  EXPECT_EQ(dl::inspect_import(no_shape).check, ImportCheck::Malformed);
  DLTensor bad_ndim = tensor(data, shape, unit);
  bad_ndim.ndim = -1;
  EXPECT_EQ(dl::inspect_import(bad_ndim).check, ImportCheck::Malformed);
  std::vector<int64_t> huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(dl::inspect_import(tensor(data, huge, nullptr)).check, ImportCheck::TooLarge);
  std::vector<int64_t> wide = {2};
  int64_t far[] = {INT64_MAX};
  EXPECT_EQ(dl::inspect_import(tensor(data, wide, far)).check, ImportCheck::TooLarge);
  DLTensor wraps = tensor(data, shape, unit);
  wraps.byte_offset = UINT64_MAX - 2;
  EXPECT_EQ(dl::inspect_import(wraps).check, ImportCheck::Malformed);
}

TEST(DlpackImport, CopyIsRowMajorWhateverTheStrides) {
  // A 2x3 view reversed along both modes, starting 2 bytes into the buffer.
  alignas(8) unsigned char raw[2 + 6 * 4];
  for (int i = 0; i < 6; ++i) {
    const float f = static_cast<float>(i);
    std::memcpy(raw + 2 + 4 * i, &f, 4);
  }
  std::vector<int64_t> shape = {2, 3};
  int64_t strides[] = {-3, -1};
  const DLTensor t = tensor(raw, shape, strides, {kDLFloat, 32, 1}, kDLCPU, 2 + 5 * 4);
  const dl::ImportView v = dl::inspect_import(t);
  EXPECT_EQ(v.check, ImportCheck::NegativeStride);
  float out[6] = {};
  dl::copy_row_major(v, out);
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  std::vector<LeafMode> leaves;
  dl::row_major_leaves(v, &leaves);
  EXPECT_EQ(leaves, (std::vector<LeafMode>{{2, 3}, {3, 1}}));
}

TEST(DlpackImport, BoolCopyNormalizes) {
  unsigned char raw[3] = {0, 1, 2};
  std::vector<int64_t> shape = {3};
  const dl::ImportView v = dl::inspect_import(tensor(raw, shape, nullptr, {kDLBool, 8, 1}));
  unsigned char out[3] = {9, 9, 9};
  dl::copy_row_major(v, out);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 1);
}

// A managed tensor whose deleter counts its calls.
int g_legacy_deleted = 0;
int g_versioned_deleted = 0;
void legacy_deleter(DLManagedTensor*) { ++g_legacy_deleted; }
void versioned_deleter(DLManagedTensorVersioned*) { ++g_versioned_deleted; }

TEST(DlpackImport, ImportedTensorRunsTheDeleterOnce) {
  g_legacy_deleted = g_versioned_deleted = 0;
  DLManagedTensor legacy{};
  legacy.deleter = legacy_deleter;
  DLManagedTensorVersioned versioned{};
  versioned.deleter = versioned_deleter;
  versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  {
    auto a = dl::ImportedTensor::legacy(&legacy);
    EXPECT_FALSE(a.is_versioned());
    EXPECT_FALSE(a.read_only());  // no flags word: the binding decides
    auto b = std::move(a);
    EXPECT_FALSE(static_cast<bool>(a));
    b.reset();
    EXPECT_EQ(g_legacy_deleted, 1);
    b.reset();
    EXPECT_EQ(g_legacy_deleted, 1);
    auto c = dl::ImportedTensor::versioned(&versioned);
    EXPECT_TRUE(c.read_only());
    EXPECT_FALSE(c.is_copied());
  }
  EXPECT_EQ(g_versioned_deleted, 1);  // the destructor
  // Handed to adopting storage, the deleter runs when the storage lets go.
  {
    sw::AlignedBuffer buf;
    float x = 0;
    auto d = dl::ImportedTensor::versioned(&versioned);
    buf.adopt(&x, sizeof x, d.hand_over());
    EXPECT_FALSE(static_cast<bool>(d));
    sw::StorageControl* e = buf.acquire_export_ref();
    buf.release();
    EXPECT_EQ(g_versioned_deleted, 1);
    sw::drop_export_ref(e);
    EXPECT_EQ(g_versioned_deleted, 2);
  }
  EXPECT_EQ(g_versioned_deleted, 2);
  DLManagedTensor no_deleter{};
  dl::ImportedTensor::legacy(&no_deleter).reset();  // a null deleter is allowed
}

}  // namespace

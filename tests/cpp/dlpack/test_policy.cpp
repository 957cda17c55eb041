// The export decisions of __dlpack__ (the "export decisions" section of
// csrc/engine/dlpack/export.hpp).
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "dlpack/export.hpp"

namespace dl = sw::dlpack;
using sw::DTypeCode;
using sw::IntTree;
using sw::Layout;

namespace {
dl::IntPair pair(long long a, long long b, int oa = 0, int ob = 0) {
  dl::IntPair p;
  p.value[0] = a;
  p.value[1] = b;
  p.overflow[0] = oa;
  p.overflow[1] = ob;
  return p;
}
Layout rank1(int64_t extent, int64_t stride) {
  return Layout(IntTree::node({IntTree::leaf(extent)}), IntTree::node({IntTree::leaf(stride)}));
}
}  // namespace

TEST(DlpackPolicy, VersionNegotiation) {
  EXPECT_EQ(dl::choose_version(pair(0, 8)), dl::VersionChoice::Legacy);
  EXPECT_EQ(dl::choose_version(pair(1, 0)), dl::VersionChoice::Versioned);
  EXPECT_EQ(dl::choose_version(pair(7, 3)), dl::VersionChoice::Versioned);
  EXPECT_EQ(dl::choose_version(pair(0, 0, 1, 0)), dl::VersionChoice::Versioned);  // a huge major
  EXPECT_EQ(dl::choose_version(pair(0, 0, 0, 1)), dl::VersionChoice::Legacy);     // a huge minor
  EXPECT_EQ(dl::choose_version(pair(-1, 0)), dl::VersionChoice::Negative);
  EXPECT_EQ(dl::choose_version(pair(1, -1)), dl::VersionChoice::Negative);
  EXPECT_EQ(dl::choose_version(pair(0, 0, 1, -1)), dl::VersionChoice::Negative);  // hugely negative minor
}

TEST(DlpackPolicy, DeviceMatching) {
  const DLDevice cpu{kDLCPU, 0};
  EXPECT_TRUE(dl::device_matches(pair(1, 0), cpu));
  EXPECT_FALSE(dl::device_matches(pair(1, 1), cpu));
  EXPECT_FALSE(dl::device_matches(pair(2, 0), cpu));
  EXPECT_FALSE(dl::device_matches(pair(1, 0, 0, 1), cpu));
  EXPECT_TRUE(dl::device_matches(pair(13, 2), DLDevice{static_cast<DLDeviceType>(13), 2}));
}

TEST(DlpackPolicy, FieldRanges) {
  EXPECT_TRUE(dl::fits_int32(INT32_MAX));
  EXPECT_TRUE(dl::fits_int32(INT32_MIN));
  EXPECT_FALSE(dl::fits_int32(static_cast<long long>(INT32_MAX) + 1));
  EXPECT_FALSE(dl::fits_int32(static_cast<long long>(INT32_MIN) - 1));
  EXPECT_TRUE(dl::fits_pointer(0));
  EXPECT_TRUE(dl::fits_pointer(static_cast<unsigned long long>(UINTPTR_MAX)));
}

TEST(DlpackPolicy, StorageGone) {
  EXPECT_FALSE(dl::storage_gone(0, 0, false, true));  // no elements: nothing to address
  EXPECT_TRUE(dl::storage_gone(4, 0, false, false));
  EXPECT_FALSE(dl::storage_gone(4, 0x1000, false, false));
  EXPECT_TRUE(dl::storage_gone(4, 0x1000, false, true));   // released during the export
  EXPECT_FALSE(dl::storage_gone(4, 0x1000, true, true));   // released before: the hook's pointer stands
}

TEST(DlpackPolicy, MoveHints) {
  EXPECT_STREQ(dl::cpu_move_dtype_arg(DTypeCode::Float32), "");
  EXPECT_STREQ(dl::cpu_move_dtype_arg(DTypeCode::Int32), ", dtype=strideweave.DType.Int32");
  EXPECT_STREQ(dl::cpu_move_dtype_arg(DTypeCode::Bool), ", dtype=strideweave.DType.Bool");
  EXPECT_EQ(dl::cpu_move_dtype_arg(DTypeCode::Float64), nullptr);
  EXPECT_EQ(dl::cpu_move_dtype_arg(DTypeCode::Compound), nullptr);
}

TEST(DlpackPolicy, CpuExportChecksInOrder) {
  float buf[8] = {};
  const dl::CpuStorageView view{DTypeCode::Float32, buf, 8};
  const auto p = reinterpret_cast<uintptr_t>(buf);
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, view, p, 0, rank1(8, 1)), dl::CpuExport::Pin);
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, view, p, 4, rank1(2, 2)), dl::CpuExport::Pin);  // cosize 3
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, view, p, 6, rank1(2, 2)), dl::CpuExport::SpanExceeds);
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, view, p + 4, 0, rank1(2, 1)),
            dl::CpuExport::PointerMismatch);
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Int32, view, p, 0, rank1(2, 1)), dl::CpuExport::DtypeMismatch);
  const dl::CpuStorageView released{DTypeCode::Float32, nullptr, 8};
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, released, 0, 0, rank1(2, 1)), dl::CpuExport::NoData);
  // The dtype is checked before anything else; offsets near INT64_MAX do not overflow.
  EXPECT_EQ(dl::check_cpu_export(DTypeCode::Float32, view, p, INT64_MAX, rank1(2, 1)), dl::CpuExport::SpanExceeds);
}

TEST(DlpackPolicy, BorrowedDLTensor) {
  EXPECT_EQ(dl::byte_offset(3, DTypeCode::Float32), 12u);
  EXPECT_EQ(dl::byte_offset(3, DTypeCode::Float64), 24u);
  const std::vector<sw::LeafMode> leaves{{2, 3}, {3, 1}};
  int64_t* dims = dl::dims_block(leaves);
  ASSERT_NE(dims, nullptr);
  EXPECT_EQ((std::vector<int64_t>(dims, dims + 4)), (std::vector<int64_t>{2, 3, 3, 1}));
  EXPECT_EQ(dl::dims_block(std::vector<sw::LeafMode>{}), nullptr);

  int32_t data[6] = {};
  dl::ExportSpec spec;
  spec.data = data;
  spec.dtype = DLDataType{kDLInt, 32, 1};
  spec.byte_offset = 8;
  spec.leaves = leaves;
  DLTensor t{};
  dl::fill_dltensor(spec, dims, &t);
  EXPECT_EQ(t.data, data);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.dtype.code, kDLInt);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.shape, dims);
  EXPECT_EQ(t.strides, dims + 2);
  EXPECT_EQ(t.byte_offset, 8u);
  std::free(dims);
}

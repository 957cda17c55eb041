// The DLPack ABI the exporter relies on, checked against the vendored official
// header (subprojects/dlpack, v1.3): sizes and field offsets that consumers
// (NumPy, PyTorch, JAX) read from the capsule pointer, flag bits, the enum
// values we export and the version macros. LP64 only (x86_64, aarch64).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <dlpack/dlpack.h>

static_assert(sizeof(void*) == 8, "the DLPack ABI pins below assume an LP64 target");

// The compile-time pins: a mismatched header fails the build, not only a test.
static_assert(DLPACK_MAJOR_VERSION == 1, "DLPack 1.x ABI");
static_assert(DLPACK_MINOR_VERSION >= 3, "DLPack header at least 1.3");
static_assert(sizeof(DLPackVersion) == 8);
static_assert(sizeof(DLDevice) == 8);
static_assert(sizeof(DLDataType) == 4);
static_assert(sizeof(DLTensor) == 48);
static_assert(sizeof(DLManagedTensor) == 64);
static_assert(sizeof(DLManagedTensorVersioned) == 80);
static_assert(std::is_standard_layout_v<DLTensor> && std::is_trivially_copyable_v<DLTensor>);
static_assert(std::is_standard_layout_v<DLManagedTensorVersioned>);

TEST(DLPackAbi, SizesMatchUpstream) {
  EXPECT_EQ(sizeof(DLTensor), 48u);
  EXPECT_EQ(sizeof(DLManagedTensor), 64u);
  EXPECT_EQ(sizeof(DLManagedTensorVersioned), 80u);
  EXPECT_EQ(DLPACK_FLAG_BITMASK_READ_ONLY, 1u);
  EXPECT_EQ(DLPACK_FLAG_BITMASK_IS_COPIED, 2u);
}

TEST(DLPackAbi, VersionMacros) {
  EXPECT_EQ(DLPACK_MAJOR_VERSION, 1);
  EXPECT_EQ(DLPACK_MINOR_VERSION, 3);
}

TEST(DLPackAbi, FlagBits) {
  EXPECT_EQ(static_cast<uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY), uint64_t{1} << 0);
  EXPECT_EQ(static_cast<uint64_t>(DLPACK_FLAG_BITMASK_IS_COPIED), uint64_t{1} << 1);
  EXPECT_EQ(static_cast<uint64_t>(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), uint64_t{1} << 2);
}

TEST(DLPackAbi, SmallStructs) {
  EXPECT_EQ(offsetof(DLPackVersion, major), 0u);
  EXPECT_EQ(offsetof(DLPackVersion, minor), 4u);
  EXPECT_EQ(sizeof(DLDeviceType), 4u);
  EXPECT_EQ(offsetof(DLDevice, device_type), 0u);
  EXPECT_EQ(offsetof(DLDevice, device_id), 4u);
  EXPECT_EQ(offsetof(DLDataType, code), 0u);
  EXPECT_EQ(offsetof(DLDataType, bits), 1u);
  EXPECT_EQ(offsetof(DLDataType, lanes), 2u);
}

TEST(DLPackAbi, DLTensorOffsets) {
  EXPECT_EQ(offsetof(DLTensor, data), 0u);
  EXPECT_EQ(offsetof(DLTensor, device), 8u);
  EXPECT_EQ(offsetof(DLTensor, ndim), 16u);
  EXPECT_EQ(offsetof(DLTensor, dtype), 20u);
  EXPECT_EQ(offsetof(DLTensor, shape), 24u);
  EXPECT_EQ(offsetof(DLTensor, strides), 32u);
  EXPECT_EQ(offsetof(DLTensor, byte_offset), 40u);
}

TEST(DLPackAbi, ManagedTensorOffsets) {
  EXPECT_EQ(offsetof(DLManagedTensor, dl_tensor), 0u);
  EXPECT_EQ(offsetof(DLManagedTensor, manager_ctx), 48u);
  EXPECT_EQ(offsetof(DLManagedTensor, deleter), 56u);
}

TEST(DLPackAbi, ManagedTensorVersionedOffsets) {
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, version), 0u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, manager_ctx), 8u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, deleter), 16u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, flags), 24u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, dl_tensor), 32u);
}

TEST(DLPackAbi, ExportedEnumValues) {
  // The values dlpack_info() hooks and consumers exchange as plain integers.
  EXPECT_EQ(static_cast<int>(kDLCPU), 1);
  EXPECT_EQ(static_cast<int>(kDLCUDA), 2);
  EXPECT_EQ(static_cast<int>(kDLMetal), 8);
  EXPECT_EQ(static_cast<int>(kDLInt), 0);
  EXPECT_EQ(static_cast<int>(kDLUInt), 1);
  EXPECT_EQ(static_cast<int>(kDLFloat), 2);
  EXPECT_EQ(static_cast<int>(kDLBool), 6);
}

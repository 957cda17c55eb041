// sw::CarrierKind rules: dtype tables and hints per built-in kind, the
// definition storage dtypes, host storage sizing and the slot-index rule.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <stdexcept>

#include "carriers/kinds.hpp"
#include "storage/aligned_buffer.hpp"

using sw::CarrierKind;
using sw::DTypeCode;

namespace {

constexpr DTypeCode kAll[] = {DTypeCode::Any,     DTypeCode::Floating, DTypeCode::Integer, DTypeCode::Float32,
                              DTypeCode::Float64, DTypeCode::Int32,    DTypeCode::Bool,    DTypeCode::Compound};

int supported_count(CarrierKind k) {
  int n = 0;
  for (DTypeCode c : kAll) n += sw::supports_dtype(k, c);
  return n;
}

TEST(CarrierKinds, DtypeTables) {
  for (CarrierKind k : {CarrierKind::CPU, CarrierKind::Metal}) {
    EXPECT_TRUE(sw::supports_dtype(k, DTypeCode::Float32));
    EXPECT_TRUE(sw::supports_dtype(k, DTypeCode::Int32));
    EXPECT_TRUE(sw::supports_dtype(k, DTypeCode::Bool));
    EXPECT_EQ(supported_count(k), 3);
    EXPECT_STREQ(sw::supported_dtypes_hint(k), "use DType.Float32, DType.Int32 or DType.Bool");
  }
  EXPECT_TRUE(sw::supports_dtype(CarrierKind::Generic, DTypeCode::Any));
  EXPECT_TRUE(sw::supports_dtype(CarrierKind::Generic, DTypeCode::Floating));
  EXPECT_FALSE(sw::supports_dtype(CarrierKind::Generic, DTypeCode::Float64));
  EXPECT_EQ(supported_count(CarrierKind::Generic), 5);
  EXPECT_TRUE(sw::supports_dtype(CarrierKind::FileBacked, DTypeCode::Floating));
  EXPECT_FALSE(sw::supports_dtype(CarrierKind::FileBacked, DTypeCode::Bool));
  EXPECT_EQ(supported_count(CarrierKind::FileBacked), 3);
  EXPECT_STREQ(sw::supported_dtypes_hint(CarrierKind::FileBacked), "use DType.Floating, DType.Float32 or DType.Int32");
}

TEST(CarrierKinds, Names) {
  EXPECT_STREQ(sw::carrier_kind_name(CarrierKind::CPU), "CPU");
  EXPECT_STREQ(sw::carrier_kind_name(CarrierKind::Generic), "Generic");
  EXPECT_STREQ(sw::carrier_kind_name(CarrierKind::FileBacked), "FileBacked");
  EXPECT_STREQ(sw::carrier_kind_name(CarrierKind::Metal), "Metal");
}

TEST(CarrierKinds, DefinitionStorageDtypesRoundTrip) {
  int found = 0;
  for (DTypeCode c : kAll) {
    const int i = sw::definition_storage_index(c);
    if (i < 0) continue;
    ++found;
    ASSERT_LT(i, sw::kDefinitionStorageCount);
    EXPECT_EQ(sw::definition_storage_code(i), c);
  }
  EXPECT_EQ(found, sw::kDefinitionStorageCount);
  EXPECT_EQ(sw::definition_storage_index(DTypeCode::Integer), -1);
  EXPECT_EQ(sw::definition_storage_index(DTypeCode::Compound), -1);
}

TEST(CarrierKinds, HostStorageBytes) {
  EXPECT_EQ(sw::host_storage_bytes(0, DTypeCode::Float32), 0u);
  EXPECT_EQ(sw::host_storage_bytes(10, DTypeCode::Int32), 40u);
  EXPECT_EQ(sw::host_storage_bytes(10, DTypeCode::Bool), 10u);
  EXPECT_THROW(sw::host_storage_bytes(-1, DTypeCode::Float32), std::invalid_argument);
  EXPECT_THROW(sw::host_storage_bytes(1, DTypeCode::Any), std::invalid_argument);
  const int64_t most = static_cast<int64_t>((SIZE_MAX - sw::kStorageAlignment) / 4);
  EXPECT_EQ(sw::host_storage_bytes(most, DTypeCode::Float32), static_cast<size_t>(most) * 4);
  EXPECT_THROW(sw::host_storage_bytes(most + 1, DTypeCode::Float32), std::bad_alloc);
}

TEST(CarrierKinds, SlotIndexIsNotWrapped) {
  EXPECT_TRUE(sw::slot_in_range(0, 1));
  EXPECT_FALSE(sw::slot_in_range(1, 1));
  EXPECT_FALSE(sw::slot_in_range(-1, 5));
  EXPECT_FALSE(sw::slot_in_range(0, 0));
}

}  // namespace

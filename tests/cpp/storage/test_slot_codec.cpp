// sw::codec: per-dtype slot encoding, the conversion rules and item sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "storage/slot_codec.hpp"

namespace {

using sw::DTypeCode;
using sw::codec::SlotValue;
using sw::codec::Status;

TEST(SlotCodec, SlotBytes) {
  EXPECT_EQ(sw::codec::slot_bytes(DTypeCode::Floating), 8);
  EXPECT_EQ(sw::codec::slot_bytes(DTypeCode::Float64), 8);
  EXPECT_EQ(sw::codec::slot_bytes(DTypeCode::Float32), 4);
  EXPECT_EQ(sw::codec::slot_bytes(DTypeCode::Int32), 4);
  EXPECT_EQ(sw::codec::slot_bytes(DTypeCode::Bool), 1);
  for (DTypeCode c : {DTypeCode::Any, DTypeCode::Integer, DTypeCode::Compound}) {
    EXPECT_FALSE(sw::codec::has_codec(c));
    EXPECT_EQ(sw::codec::slot_bytes(c), 0);
  }
  for (DTypeCode c : {DTypeCode::Floating, DTypeCode::Float64, DTypeCode::Float32, DTypeCode::Int32, DTypeCode::Bool})
    EXPECT_LE(sw::codec::slot_bytes(c), sw::codec::kMaxSlotBytes);
}

TEST(SlotCodec, FloatingIsAnEightByteDouble) {
  unsigned char b[8];
  ASSERT_EQ(sw::codec::encode(DTypeCode::Floating, SlotValue{0.1}, b), Status::Ok);
  double d;
  std::memcpy(&d, b, 8);
  EXPECT_EQ(d, 0.1);  // no rounding to binary32
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Floating, b)), 0.1);
  // An integer goes in through double.
  ASSERT_EQ(sw::codec::encode(DTypeCode::Floating, SlotValue{int64_t{-7}}, b), Status::Ok);
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Floating, b)), -7.0);
}

TEST(SlotCodec, Float32RoundsToNearestBinary32) {
  unsigned char b[4];
  ASSERT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{0.1}, b), Status::Ok);
  float f;
  std::memcpy(&f, b, 4);
  EXPECT_EQ(f, 0.1f);
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Float32, b)), static_cast<double>(0.1f));
  // 2^24 + 1 is not representable: ties to even gives 2^24.
  ASSERT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{int64_t{16777217}}, b), Status::Ok);
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Float32, b)), 16777216.0);
  // A finite value beyond the binary32 range is out of range (as an Int32
  // overflow is); nothing is written.
  std::memset(b, 9, 4);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{1e300}, b), Status::OutOfRange);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{-1e40}, b), Status::OutOfRange);
  EXPECT_EQ(b[0], 9);
  // FLT_MAX plus less than half an ulp still rounds to FLT_MAX.
  const double flt_max = std::numeric_limits<float>::max();
  ASSERT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{flt_max * (1 + 1e-9)}, b), Status::Ok);
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Float32, b)), flt_max);
  // NaN and the infinities stay as they are.
  ASSERT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{-std::numeric_limits<double>::infinity()}, b), Status::Ok);
  EXPECT_TRUE(std::isinf(std::get<double>(sw::codec::decode(DTypeCode::Float32, b))));
  EXPECT_LT(std::get<double>(sw::codec::decode(DTypeCode::Float32, b)), 0.0);
  ASSERT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{std::nan("")}, b), Status::Ok);
  EXPECT_TRUE(std::isnan(std::get<double>(sw::codec::decode(DTypeCode::Float32, b))));
  float rounded = 0;
  ASSERT_EQ(sw::codec::to_float32(1.0 + 1e-12, &rounded), Status::Ok);
  EXPECT_EQ(rounded, 1.0f);
}

TEST(SlotCodec, Int32ChecksTheRange) {
  unsigned char b[4] = {9, 9, 9, 9};
  const int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  for (int64_t x : {lo, int64_t{-1}, int64_t{0}, hi}) {
    ASSERT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{x}, b), Status::Ok);
    int32_t raw;
    std::memcpy(&raw, b, 4);
    EXPECT_EQ(raw, x);
    EXPECT_EQ(std::get<int64_t>(sw::codec::decode(DTypeCode::Int32, b)), x);
  }
  std::memset(b, 9, 4);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{hi + 1}, b), Status::OutOfRange);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{lo - 1}, b), Status::OutOfRange);
  EXPECT_EQ(b[0], 9);  // nothing written on failure
  int32_t out = 5;
  EXPECT_EQ(sw::codec::to_int32(int64_t{1} << 40, &out), Status::OutOfRange);
  EXPECT_EQ(out, 5);
}

TEST(SlotCodec, KindsMustMatchTheSlot) {
  unsigned char b[8] = {};
  EXPECT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{1.5}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{true}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Float32, SlotValue{true}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Floating, SlotValue{false}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Bool, SlotValue{int64_t{1}}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Bool, SlotValue{1.0}, b), Status::WrongType);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Any, SlotValue{1.0}, b), Status::Unsupported);
  EXPECT_EQ(sw::codec::encode(DTypeCode::Integer, SlotValue{int64_t{1}}, b), Status::Unsupported);
}

TEST(SlotCodec, BoolIsOneByte) {
  unsigned char b[2] = {7, 7};
  ASSERT_EQ(sw::codec::encode(DTypeCode::Bool, SlotValue{true}, b), Status::Ok);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 7);  // one byte only
  ASSERT_EQ(sw::codec::encode(DTypeCode::Bool, SlotValue{false}, b), Status::Ok);
  EXPECT_EQ(b[0], 0);
  const unsigned char any_nonzero = 0x80;
  EXPECT_TRUE(std::get<bool>(sw::codec::decode(DTypeCode::Bool, &any_nonzero)));
}

TEST(SlotCodec, UnalignedSlots) {
  unsigned char b[16] = {};
  ASSERT_EQ(sw::codec::encode(DTypeCode::Floating, SlotValue{2.5}, b + 3), Status::Ok);
  EXPECT_EQ(std::get<double>(sw::codec::decode(DTypeCode::Floating, b + 3)), 2.5);
  ASSERT_EQ(sw::codec::encode(DTypeCode::Int32, SlotValue{int64_t{-123456}}, b + 1), Status::Ok);
  EXPECT_EQ(std::get<int64_t>(sw::codec::decode(DTypeCode::Int32, b + 1)), -123456);
}

TEST(SlotCodec, CanonicalValue) {
  SlotValue out;
  ASSERT_EQ(sw::codec::canonical(DTypeCode::Float32, SlotValue{0.1}, &out), Status::Ok);
  EXPECT_EQ(std::get<double>(out), static_cast<double>(0.1f));
  ASSERT_EQ(sw::codec::canonical(DTypeCode::Floating, SlotValue{int64_t{3}}, &out), Status::Ok);
  EXPECT_EQ(std::get<double>(out), 3.0);
  ASSERT_EQ(sw::codec::canonical(DTypeCode::Int32, SlotValue{int64_t{-4}}, &out), Status::Ok);
  EXPECT_EQ(std::get<int64_t>(out), -4);
  ASSERT_EQ(sw::codec::canonical(DTypeCode::Bool, SlotValue{true}, &out), Status::Ok);
  EXPECT_TRUE(std::get<bool>(out));
  out = SlotValue{1.0};
  EXPECT_EQ(sw::codec::canonical(DTypeCode::Int32, SlotValue{int64_t{1} << 33}, &out), Status::OutOfRange);
  EXPECT_EQ(std::get<double>(out), 1.0);  // untouched on failure
}

}  // namespace

#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "data/convert.hpp"

namespace {
sw::ScalarFormat fmt(const char* s) {
  sw::ScalarFormat f;
  EXPECT_TRUE(sw::parse_buffer_format(s, &f)) << s;
  return f;
}
}  // namespace

TEST(BufferFormat, ParsesScalarCodesAndByteOrder) {
  auto f = fmt("f");
  EXPECT_EQ(f.kind, sw::ScalarKind::Float);
  EXPECT_EQ(f.itemsize, 4);
  EXPECT_FALSE(f.byteswap);
  EXPECT_EQ(fmt("<d").itemsize, 8);
  EXPECT_FALSE(fmt("<d").byteswap);  // little-endian host
  EXPECT_TRUE(fmt(">i").byteswap);
  EXPECT_EQ(fmt("=l").itemsize, 4);  // standard size
  EXPECT_EQ(fmt("l").itemsize, static_cast<int>(sizeof(long)));
  EXPECT_EQ(fmt("?").kind, sw::ScalarKind::Bool);
  EXPECT_EQ(fmt("B").kind, sw::ScalarKind::Unsigned);
  EXPECT_EQ(fmt("e").itemsize, 2);
  sw::ScalarFormat out;
  for (const char* bad : {"Zf", "O", "", "ff", "2f", "s", "x", "=n", "T{f:a:}", "P"})
    EXPECT_FALSE(sw::parse_buffer_format(bad, &out)) << bad;
}

TEST(BufferFormat, InferenceAndAcceptance) {
  EXPECT_EQ(sw::inferred_dtype(sw::ScalarKind::Float), sw::DTypeCode::Float32);
  EXPECT_EQ(sw::inferred_dtype(sw::ScalarKind::Unsigned), sw::DTypeCode::Int32);
  EXPECT_EQ(sw::inferred_dtype(sw::ScalarKind::Bool), sw::DTypeCode::Bool);
  EXPECT_FALSE(sw::kind_accepted(sw::ScalarKind::Bool, sw::DTypeCode::Float32));
  EXPECT_FALSE(sw::kind_accepted(sw::ScalarKind::Float, sw::DTypeCode::Int32));
  EXPECT_FALSE(sw::kind_accepted(sw::ScalarKind::Signed, sw::DTypeCode::Bool));
  EXPECT_FALSE(sw::kind_accepted(sw::ScalarKind::Float, sw::DTypeCode::Floating));
  EXPECT_TRUE(sw::kind_accepted(sw::ScalarKind::Signed, sw::DTypeCode::Float32));
}

TEST(ConvertStrided, ContiguousFloat64RoundsToFloat32) {
  std::vector<double> src = {1.0, 0.1, -2.5, std::numeric_limits<double>::infinity(), 3.0, 4.0};
  std::vector<float> dst(6, -1.0f);
  const int64_t ext[] = {2, 3}, ss[] = {24, 8}, ds[] = {3, 1};
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 2);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_EQ(dst[1], static_cast<float>(0.1));
  EXPECT_TRUE(std::isinf(dst[3]));
  EXPECT_EQ(dst[5], 4.0f);
}

TEST(ConvertStrided, NegativeAndTransposedStridesAndHoles) {
  // src is a 2x3 row-major float array read transposed and reversed.
  std::vector<float> src = {0, 1, 2, 3, 4, 5};
  // view: shape (3, 2), element (i, j) = src[(2 - i) + 3 * j]
  const float* base = src.data() + 2;
  const int64_t ext[] = {3, 2}, ss[] = {-4, 12}, ds[] = {1, 4};  // dst column-major with a hole row
  std::vector<float> dst(8, 0.0f);
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, base, fmt("f"), ss, ext, 2);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_EQ(dst, (std::vector<float>{2, 1, 0, 0, 5, 4, 3, 0}));
}

TEST(ConvertStrided, Int32RangeReportsTheFirstOffendingOrdinal) {
  std::vector<int64_t> src = {1, -2, int64_t{1} << 31, 7};
  std::vector<int32_t> dst(4, 0);
  const int64_t ext[] = {4}, ss[] = {8}, ds[] = {1};
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Int32, ds, src.data(), fmt("q"), ss, ext, 1);
  EXPECT_EQ(st.error, sw::ConvertError::Overflow);
  EXPECT_EQ(st.ordinal, 2);
  std::vector<uint32_t> u = {0, 0x80000000u};
  const int64_t ss4[] = {4}, ext2[] = {2};
  st = sw::convert_strided(dst.data(), sw::DTypeCode::Int32, ds, u.data(), fmt("I"), ss4, ext2, 1);
  EXPECT_EQ(st.error, sw::ConvertError::Overflow);
  EXPECT_EQ(st.ordinal, 1);
  std::vector<int16_t> h = {-7, 300};
  const int64_t ss2[] = {2};
  st = sw::convert_strided(dst.data(), sw::DTypeCode::Int32, ds, h.data(), fmt("h"), ss2, ext2, 1);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_EQ(dst[0], -7);
  EXPECT_EQ(dst[1], 300);
}

TEST(ConvertStrided, Float32RangeReportsTheFirstOffendingOrdinal) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<float> dst(5, 0.0f);
  const int64_t ext[] = {5}, ss[] = {8}, ds[] = {1};
  // Contiguous (the vectorized pass) and strided sources both check.
  std::vector<double> src = {1.0, -inf, std::nan(""), -1e39, 2.0};
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 1);
  EXPECT_EQ(st.error, sw::ConvertError::Overflow);
  EXPECT_EQ(st.ordinal, 3);
  std::vector<double> wide = {1.0, 0.0, 1e300, 0.0};
  const int64_t ext2[] = {2}, ss16[] = {16};
  st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, wide.data(), fmt("d"), ss16, ext2, 1);
  EXPECT_EQ(st.error, sw::ConvertError::Overflow);
  EXPECT_EQ(st.ordinal, 1);
  // NaN and the infinities are values, not overflows.
  src[3] = 3.0;
  st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 1);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_TRUE(std::isinf(dst[1]) && dst[1] < 0);
  EXPECT_TRUE(std::isnan(dst[2]));
  // float32 sources cannot overflow; float16 neither.
  std::vector<float> f = {std::numeric_limits<float>::max()};
  const int64_t ext1[] = {1}, ss4[] = {4};
  st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, f.data(), fmt("f"), ss4, ext1, 1);
  EXPECT_EQ(st.error, sw::ConvertError::None);
}

TEST(ConvertStrided, RejectedKindWritesNothing) {
  std::vector<uint8_t> b = {1, 0};
  std::vector<float> dst(2, -1.0f);
  const int64_t ext[] = {2}, ss[] = {1}, ds[] = {1};
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, b.data(), fmt("?"), ss, ext, 1);
  EXPECT_EQ(st.error, sw::ConvertError::Rejected);
  EXPECT_EQ(dst[0], -1.0f);
}

TEST(ConvertStrided, ByteSwappedHalfAndBoolAndRankZero) {
  // 1.5 as binary16 is 0x3E00; big-endian bytes 3E 00.
  const unsigned char be[] = {0x3E, 0x00, 0xC0, 0x00};  // 1.5, -2.0
  std::vector<float> dst(2);
  const int64_t ext[] = {2}, ss[] = {2}, ds[] = {1};
  auto st = sw::convert_strided(dst.data(), sw::DTypeCode::Float32, ds, be, fmt(">e"), ss, ext, 2 - 1);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_EQ(dst[0], 1.5f);
  EXPECT_EQ(dst[1], -2.0f);
  const uint8_t bools[] = {2, 0, 1};  // any non-zero byte is True
  uint8_t out[3];
  const int64_t e3[] = {3}, s1[] = {1};
  sw::convert_strided(out, sw::DTypeCode::Bool, s1, bools, fmt("?"), s1, e3, 1);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 1);
  const int32_t one = 42;
  int32_t o = 0;
  st = sw::convert_strided(&o, sw::DTypeCode::Int32, nullptr, &one, fmt("i"), nullptr, nullptr, 0);
  EXPECT_EQ(st.error, sw::ConvertError::None);
  EXPECT_EQ(o, 42);
}

// The parallel conversion gives convert_strided's result and first error.
TEST(ConvertStrided, ParallelPiecesAgreeWithOneThread) {
  const int64_t rows = 600, cols = 1000;  // above kParallelConvertElements
  ASSERT_GE(rows * cols, sw::kParallelConvertElements);
  std::vector<double> src(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i) * 0.5;
  const int64_t ext[] = {rows, cols}, ss[] = {cols * 8, 8}, ds[] = {1, rows};  // transposed destination
  std::vector<float> one(src.size()), many(src.size());
  auto a = sw::convert_strided(one.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 2);
  auto b = sw::convert_strided_parallel(many.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 2, 4);
  EXPECT_EQ(a.error, sw::ConvertError::None);
  EXPECT_EQ(b.error, sw::ConvertError::None);
  EXPECT_EQ(one, many);
  src[static_cast<size_t>(450 * cols + 7)] = 1e300;  // a late row: reported with its global ordinal
  src[static_cast<size_t>(590 * cols)] = -1e300;
  b = sw::convert_strided_parallel(many.data(), sw::DTypeCode::Float32, ds, src.data(), fmt("d"), ss, ext, 2, 4);
  EXPECT_EQ(b.error, sw::ConvertError::Overflow);
  EXPECT_EQ(b.ordinal, 450 * cols + 7);
  // A leading extent-1 dimension: the pieces cut the next one.
  const int64_t ext3[] = {1, rows * cols}, ss3[] = {0, 8}, ds3[] = {0, 1};
  src[static_cast<size_t>(450 * cols + 7)] = 1.0;
  src[static_cast<size_t>(590 * cols)] = 2.0;
  b = sw::convert_strided_parallel(many.data(), sw::DTypeCode::Float32, ds3, src.data(), fmt("d"), ss3, ext3, 2, 3);
  EXPECT_EQ(b.error, sw::ConvertError::None);
  for (size_t i = 0; i < src.size(); i += 9973) EXPECT_EQ(many[i], static_cast<float>(src[i]));
}

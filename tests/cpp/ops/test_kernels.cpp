// GoogleTest for the strided elementwise kernels (csrc/engine/ops/kernels.hpp).
// Expected values come from a naive per-coordinate reference built on
// sw::for_each_index, never from the kernels themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "ops/kernels.hpp"

namespace {

using sw::DTypeCode;
using sw::LeafMode;
using sw::kernels::Leaves;

// Scalar indices of every coordinate, first leaf fastest.
std::vector<int64_t> indices(const Leaves& ls) {
  std::vector<int64_t> out;
  sw::for_each_index(ls, [&](int64_t, int64_t idx) { out.push_back(idx); });
  return out;
}

int64_t span(const Leaves& ls) {
  int64_t c = 1;
  for (const auto& m : ls) c += m.stride * (m.extent - 1);
  return c;
}

template <class T>
std::vector<T> iota_buffer(int64_t n, T start = 1) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>(start + i);
  return v;
}

// Hierarchical shape [2,[3,2]] stored with gaps: strides [1,[4,13]] (cosize
// 1 + 1 + 8 + 13 = 23 for 12 elements).
const Leaves kGapped = {{2, 1}, {3, 4}, {2, 13}};
const Leaves kCompact = {{2, 1}, {3, 2}, {2, 6}};
// The same shape broadcast from [2,[1,1]]: stride 0 on the widened leaves.
const Leaves kBroadcast = {{2, 1}, {3, 0}, {2, 0}};
// A column-major-in-reverse ("transposed") order of the same shape.
const Leaves kTransposed = {{2, 6}, {3, 2}, {2, 1}};

TEST(Kernels, ElementCountAndSupport) {
  EXPECT_EQ(sw::kernels::element_count(kGapped), 12);
  EXPECT_EQ(sw::kernels::element_count({}), 1);
  EXPECT_TRUE(sw::kernels::supports(DTypeCode::Float32));
  EXPECT_TRUE(sw::kernels::supports(DTypeCode::Int32));
  EXPECT_FALSE(sw::kernels::supports(DTypeCode::Bool));
  EXPECT_FALSE(sw::kernels::supports(DTypeCode::Floating));
}

TEST(Kernels, GatherHierarchicalGappedIntoCompact) {
  auto src = iota_buffer<float>(span(kGapped), 10);
  std::vector<float> dst(12, -1.0f);
  sw::kernels::gather(DTypeCode::Float32, src.data(), kGapped, dst.data());
  auto idx = indices(kGapped);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(dst[i], src[static_cast<size_t>(idx[i])]) << i;
}

TEST(Kernels, CopyScattersIntoGappedLeavingHoles) {
  auto src = iota_buffer<int32_t>(12, 100);
  std::vector<int32_t> dst(static_cast<size_t>(span(kGapped)), -7);
  sw::kernels::copy(DTypeCode::Int32, src.data(), kCompact, dst.data(), kGapped);
  auto idx = indices(kGapped);
  std::vector<bool> hit(dst.size(), false);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(dst[static_cast<size_t>(idx[i])], src[i]);
    hit[static_cast<size_t>(idx[i])] = true;
  }
  for (size_t s = 0; s < dst.size(); ++s)
    if (!hit[s]) { EXPECT_EQ(dst[s], -7) << "hole " << s << " was written"; }
}

TEST(Kernels, CopyBool) {
  std::vector<uint8_t> src = {1, 0, 1};
  std::vector<uint8_t> dst(3, 9);
  sw::kernels::copy(DTypeCode::Bool, src.data(), {{3, 1}}, dst.data(), {{3, 1}});
  EXPECT_EQ(dst, src);
  EXPECT_THROW(sw::kernels::copy(DTypeCode::Floating, src.data(), {{3, 1}}, dst.data(), {{3, 1}}),
               std::invalid_argument);
}

TEST(Kernels, AddFloat32GappedPlusBroadcast) {
  auto a = iota_buffer<float>(span(kGapped), 1);
  std::vector<float> b = {0.5f, -2.25f};
  std::vector<float> out(12, 0.0f);
  sw::kernels::add(DTypeCode::Float32, a.data(), kGapped, b.data(), kBroadcast, out.data(), kCompact);
  auto ia = indices(kGapped), ib = indices(kBroadcast);
  for (size_t i = 0; i < 12; ++i)
    EXPECT_EQ(out[i], a[static_cast<size_t>(ia[i])] + b[static_cast<size_t>(ib[i])]) << i;
}

TEST(Kernels, AddFloat32RoundsToBinary32) {
  std::vector<float> a = {1.0f}, b = {std::ldexp(1.0f, -24) * 1.5f};
  std::vector<float> out(1);
  sw::kernels::add(DTypeCode::Float32, a.data(), {{1, 1}}, b.data(), {{1, 1}}, out.data(), {{1, 1}});
  // 1 + 1.5*2^-24 rounds to the nearest binary32, 1 + 2^-23.
  EXPECT_EQ(out[0], 1.0f + std::ldexp(1.0f, -23));
}

TEST(Kernels, MulInt32TransposedOutput) {
  auto a = iota_buffer<int32_t>(12, -5);
  auto b = iota_buffer<int32_t>(span(kGapped), 3);
  std::vector<int32_t> out(12, 0);
  sw::kernels::mul(DTypeCode::Int32, a.data(), kCompact, b.data(), kGapped, out.data(), kTransposed);
  auto ib = indices(kGapped), io = indices(kTransposed);
  for (size_t i = 0; i < 12; ++i)
    EXPECT_EQ(out[static_cast<size_t>(io[i])], a[i] * b[static_cast<size_t>(ib[i])]) << i;
}

TEST(Kernels, Int32OverflowThrows) {
  std::vector<int32_t> a = {std::numeric_limits<int32_t>::max()}, b = {1};
  std::vector<int32_t> out(1);
  EXPECT_THROW(sw::kernels::add(DTypeCode::Int32, a.data(), {{1, 1}}, b.data(), {{1, 1}}, out.data(),
                                {{1, 1}}),
               std::overflow_error);
  std::vector<int32_t> c = {65536};
  EXPECT_THROW(sw::kernels::mul(DTypeCode::Int32, c.data(), {{1, 1}}, c.data(), {{1, 1}}, out.data(),
                                {{1, 1}}),
               std::overflow_error);
  EXPECT_THROW(sw::kernels::mul_scalar_i32(c.data(), {{1, 1}}, int64_t{1} << 40, out.data(), {{1, 1}}),
               std::overflow_error);
  EXPECT_THROW(sw::kernels::mul_scalar_i32(c.data(), {{1, 1}}, std::numeric_limits<int64_t>::max(),
                                           out.data(), {{1, 1}}),
               std::overflow_error);
}

TEST(Kernels, MulScalar) {
  std::vector<float> a = {1.0f, 3.0f, -2.0f};
  std::vector<float> out(3);
  sw::kernels::mul_scalar_f32(a.data(), {{3, 1}}, 0.1, out.data(), {{3, 1}});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out[i], static_cast<float>(a[i] * 0.1));
  std::vector<int32_t> ai = {1, -3, 7};
  std::vector<int32_t> oi(3);
  sw::kernels::mul_scalar_i32(ai.data(), {{3, 1}}, -1, oi.data(), {{3, 1}});
  EXPECT_EQ(oi, (std::vector<int32_t>{-1, 3, -7}));
}

TEST(Kernels, ReluFloatAndInt) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-1.0f, 0.0f, -0.0f, 2.5f, nan};
  std::vector<float> out(5, 9.0f);
  sw::kernels::relu(DTypeCode::Float32, x.data(), {{5, 1}}, out.data(), {{5, 1}});
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_FALSE(std::signbit(out[2]));
  EXPECT_EQ(out[3], 2.5f);
  EXPECT_TRUE(std::isnan(out[4]));
  std::vector<int32_t> xi = {-4, 0, 6};
  std::vector<int32_t> oi(3);
  sw::kernels::relu(DTypeCode::Int32, xi.data(), {{3, 1}}, oi.data(), {{3, 1}});
  EXPECT_EQ(oi, (std::vector<int32_t>{0, 0, 6}));
  EXPECT_THROW(sw::kernels::relu(DTypeCode::Bool, xi.data(), {{3, 1}}, oi.data(), {{3, 1}}),
               std::invalid_argument);
}

TEST(Kernels, ReluBackwardMask) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // x is read through a transposed [2,2] view: logical {x0, x2, x1, x3}.
  std::vector<float> x = {-1.0f, 0.0f, nan, 3.0f};
  std::vector<float> g = {10.0f, 20.0f, 30.0f, 40.0f};
  std::vector<float> out(7, -1.0f);
  sw::kernels::relu_backward(g.data(), {{2, 1}, {2, 2}}, x.data(), {{2, 2}, {2, 1}}, out.data(),
                             {{2, 2}, {2, 4}});
  // Logical x: -1, nan, 0, 3 -> mask 0, 0, 0, 1; output slots 0, 2, 4, 6.
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[6], 40.0f);
  EXPECT_EQ(out[1], -1.0f);  // holes untouched
}

TEST(Kernels, SumAccumulatesInDouble) {
  // 2^24 followed by ones: float accumulation would stall at 2^24.
  std::vector<float> x(1001, 1.0f);
  x[0] = 16777216.0f;
  EXPECT_EQ(sw::kernels::sum_f32(x.data(), {{1001, 1}}), 16777216.0 + 1000.0);
  // Broadcast operand counts each coordinate.
  std::vector<float> y = {1.5f, 2.0f};
  EXPECT_EQ(sw::kernels::sum_f32(y.data(), {{2, 1}, {3, 0}}), 3 * 3.5);
  // Rank 0: a single element.
  EXPECT_EQ(sw::kernels::sum_f32(y.data() + 1, {}), 2.0);
}

TEST(Kernels, SumInt32IsExact) {
  std::vector<int32_t> x = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(), -3};
  EXPECT_EQ(sw::kernels::sum_i32(x.data(), {{3, 1}}), 2 * int64_t{std::numeric_limits<int32_t>::max()} - 3);
}

TEST(Kernels, BroadcastSumBackwardOntoGappedSource) {
  // Source [2,[1,1]] stored with stride 3 on leaf 0 (slots 0 and 3); the
  // cotangent is the compact [2,[3,2]]; summing folds the widened leaves.
  auto g = iota_buffer<float>(12, 1);
  std::vector<float> out(4, 123.0f);
  sw::kernels::broadcast_sum_backward(g.data(), kCompact, out.data(), {{2, 3}, {3, 0}, {2, 0}}, 4);
  float even = 0, odd = 0;
  for (size_t i = 0; i < 12; ++i) (i % 2 ? odd : even) += g[i];
  EXPECT_EQ(out[0], even);
  EXPECT_EQ(out[3], odd);
  EXPECT_EQ(out[1], 0.0f);  // zero-filled holes
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Kernels, SumIntoAccumulatesAcrossCalls) {
  std::vector<float> g = {1.0f, 2.0f, 3.0f};
  std::vector<double> acc(3, 0.0);
  sw::kernels::sum_into(g.data(), {{3, 1}}, acc.data(), {{3, 1}});
  sw::kernels::sum_into(g.data(), {{3, 1}}, acc.data(), {{3, 1}});
  EXPECT_EQ(acc, (std::vector<double>{2.0, 4.0, 6.0}));
  std::vector<float> out(3);
  sw::kernels::round_to_f32(acc.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{2.0f, 4.0f, 6.0f}));
}

TEST(Kernels, MismatchedLeavesThrow) {
  std::vector<float> a(8), out(8);
  EXPECT_THROW(sw::kernels::add(DTypeCode::Float32, a.data(), {{4, 1}}, a.data(), {{2, 1}}, out.data(),
                                {{4, 1}}),
               std::invalid_argument);
  EXPECT_THROW(sw::kernels::add(DTypeCode::Float32, a.data(), {{4, 1}}, a.data(), {{2, 1}, {2, 2}},
                                out.data(), {{4, 1}}),
               std::invalid_argument);
  EXPECT_THROW(sw::kernels::add(DTypeCode::Bool, a.data(), {{4, 1}}, a.data(), {{4, 1}}, out.data(),
                                {{4, 1}}),
               std::invalid_argument);
}

TEST(Kernels, LargeNonCoalescibleLayoutMatchesReference) {
  // Four leaves, strides chosen so nothing merges, with a stride-0 leaf.
  const Leaves la = {{3, 5}, {4, 1}, {2, 0}, {5, 17}};
  const Leaves lb = {{3, 1}, {4, 3}, {2, 12}, {5, 24}};
  const Leaves lo = {{3, 40}, {4, 10}, {2, 1}, {5, 2}};
  auto a = iota_buffer<float>(span(la), 1);
  auto b = iota_buffer<float>(span(lb), 2);
  std::vector<float> out(static_cast<size_t>(span(lo)), 0.0f);
  sw::kernels::mul(DTypeCode::Float32, a.data(), la, b.data(), lb, out.data(), lo);
  auto ia = indices(la), ib = indices(lb), io = indices(lo);
  for (size_t i = 0; i < ia.size(); ++i)
    EXPECT_EQ(out[static_cast<size_t>(io[i])],
              a[static_cast<size_t>(ia[i])] * b[static_cast<size_t>(ib[i])])
        << i;
}

}  // namespace

// ------------------------------------------------------------ constructors

TEST(KernelConstructors, FillRepeatsTheItem) {
  std::vector<float> f(37, -1.0f);
  const float v = 2.5f;
  sw::kernels::fill(f.data(), 36, 4, &v);
  for (size_t i = 0; i < 36; ++i) EXPECT_EQ(f[i], 2.5f);
  EXPECT_EQ(f[36], -1.0f);  // nothing past n
  std::vector<int32_t> z(5, 7);
  const int32_t zero = 0;
  sw::kernels::fill(z.data(), 5, 4, &zero);
  EXPECT_EQ(z, std::vector<int32_t>(5, 0));
  std::vector<unsigned char> b(3, 0);
  const unsigned char one = 1;
  sw::kernels::fill(b.data(), 3, 1, &one);
  EXPECT_EQ(b, std::vector<unsigned char>(3, 1));
}

TEST(KernelConstructors, ArangeValues) {
  std::vector<int32_t> i(5);
  sw::kernels::arange_i32(i.data(), 5, -2, 1);
  EXPECT_EQ(i, (std::vector<int32_t>{-2, -1, 0, 1, 2}));
  sw::kernels::arange_i32(i.data(), 3, 10, -4);
  EXPECT_EQ(std::vector<int32_t>(i.begin(), i.begin() + 3), (std::vector<int32_t>{10, 6, 2}));
  std::vector<float> f(10);
  sw::kernels::arange_f32(f.data(), 10, 0.0, 0.1);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(f[static_cast<size_t>(k)], static_cast<float>(k * 0.1));
}

TEST(KernelConstructors, ArangeCountIsNumpys) {
  EXPECT_EQ(sw::kernels::arange_count(int64_t{0}, int64_t{5}, int64_t{1}), 5);
  EXPECT_EQ(sw::kernels::arange_count(int64_t{0}, int64_t{5}, int64_t{2}), 3);
  EXPECT_EQ(sw::kernels::arange_count(int64_t{5}, int64_t{0}, int64_t{-2}), 3);
  EXPECT_EQ(sw::kernels::arange_count(int64_t{5}, int64_t{5}, int64_t{1}), 0);
  EXPECT_EQ(sw::kernels::arange_count(int64_t{0}, int64_t{5}, int64_t{-1}), 0);
  EXPECT_EQ(sw::kernels::arange_count(INT64_MIN, INT64_MAX, int64_t{1} << 62), 4);
  EXPECT_EQ(sw::kernels::arange_count(0.0, 1.0, 0.1), 10);
  EXPECT_EQ(sw::kernels::arange_count(0.0, 1.0, -0.1), 0);
  EXPECT_EQ(sw::kernels::arange_count(0.0, std::nan(""), 1.0), 0);
  EXPECT_THROW(sw::kernels::arange_count(0.0, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(sw::kernels::arange_count(int64_t{0}, int64_t{1}, int64_t{0}), std::invalid_argument);
  EXPECT_THROW(sw::kernels::arange_count(0.0, 1e300, 1.0), std::overflow_error);
}

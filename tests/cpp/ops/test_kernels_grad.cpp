// GoogleTest for the gradient and reduction kernels that moved out of the
// ops/autograd binding (reduce_sum, mul_broadcast_backward, sum_sources) and
// for the stride-0 repeat skipping of the idempotent kernels and copies.
// Expected values come from naive per-coordinate references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "layout/algebra.hpp"
#include "ops/kernels.hpp"
#include "transfer/strided_copy.hpp"

namespace {

using sw::DTypeCode;
using sw::kernels::Leaves;
namespace K = sw::kernels;

const Leaves kCompact = {{2, 1}, {3, 2}, {2, 6}};
const Leaves kGapped = {{2, 1}, {3, 4}, {2, 13}};  // cosize 23

}  // namespace

TEST(KernelsGrad, ReduceSumFloatAndInt) {
  std::vector<float> x = {1.5f, 2.0f, 3.0f, 4.0f};
  float out = -1.0f;
  K::reduce_sum(DTypeCode::Float32, x.data(), {{2, 1}, {2, 2}}, &out);
  EXPECT_EQ(out, 10.5f);
  // A broadcast operand counts every coordinate.
  K::reduce_sum(DTypeCode::Float32, x.data(), {{3, 0}}, &out);
  EXPECT_EQ(out, 4.5f);
  std::vector<int32_t> xi = {std::numeric_limits<int32_t>::max(), 1, -1};
  int32_t oi = 0;
  K::reduce_sum(DTypeCode::Int32, xi.data(), {{3, 1}}, &oi);  // the partial sum may leave the range
  EXPECT_EQ(oi, std::numeric_limits<int32_t>::max());
  EXPECT_THROW(K::reduce_sum(DTypeCode::Int32, xi.data(), {{2, 1}}, &oi), std::overflow_error);
  bool b = false;
  EXPECT_THROW(K::reduce_sum(DTypeCode::Bool, &b, {}, &b), std::invalid_argument);
}

TEST(KernelsGrad, MulBroadcastBackwardSumsProductsOntoBroadcastLeaves) {
  // g over (2,3,2) compact; y broadcast along the middle leaf; x was (2,1,2)
  // stored gapped as strides (1, 0, 5): out has 2 + 5 = 7 slots.
  std::vector<float> g(12), y(4);
  for (int i = 0; i < 12; ++i) g[i] = 0.5f + static_cast<float>(i);
  for (int i = 0; i < 4; ++i) y[i] = 1.0f + static_cast<float>(i);
  const Leaves ly = {{2, 1}, {3, 0}, {2, 2}};
  const Leaves lo = {{2, 1}, {3, 0}, {2, 5}};
  std::vector<float> out(7, -9.0f);
  K::mul_broadcast_backward(g.data(), kCompact, y.data(), ly, out.data(), lo, 7);
  std::vector<double> want(7, 0.0);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c)
        want[a + 5 * c] += static_cast<double>(g[a + 2 * b + 6 * c] * y[a + 2 * c]);
  for (int s = 0; s < 7; ++s) EXPECT_EQ(out[s], static_cast<float>(want[s])) << s;
  EXPECT_EQ(out[2], 0.0f);  // a hole is written as zero
}

TEST(KernelsGrad, SumSourcesOneTwoAndMany) {
  std::vector<float> a(12), b(23), c(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  for (int i = 0; i < 23; ++i) b[i] = 100.0f + static_cast<float>(i);
  for (int i = 0; i < 12; ++i) c[i] = 0.25f;
  const std::vector<int64_t> ia = sw::coordinate_indices(kCompact), ib = sw::coordinate_indices(kGapped);
  // One source: a copy, holes untouched.
  std::vector<float> out(23, -1.0f);
  K::sum_sources({{a.data(), &kCompact}}, out.data(), kGapped, 23);
  for (size_t k = 0; k < 12; ++k) EXPECT_EQ(out[ib[k]], a[ia[k]]);
  EXPECT_EQ(out[2], -1.0f);
  // Two sources: one binary32 addition per slot.
  std::fill(out.begin(), out.end(), -1.0f);
  K::sum_sources({{a.data(), &kCompact}, {b.data(), &kGapped}}, out.data(), kGapped, 23);
  for (size_t k = 0; k < 12; ++k) EXPECT_EQ(out[ib[k]], a[ia[k]] + b[ib[k]]);
  EXPECT_EQ(out[2], -1.0f);
  // Three: double accumulation, every slot written.
  std::fill(out.begin(), out.end(), -1.0f);
  K::sum_sources({{a.data(), &kCompact}, {b.data(), &kGapped}, {c.data(), &kCompact}}, out.data(), kGapped, 23);
  for (size_t k = 0; k < 12; ++k)
    EXPECT_EQ(out[ib[k]], static_cast<float>(static_cast<double>(a[ia[k]]) + b[ib[k]] + c[ia[k]]));
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_THROW(K::sum_sources({}, out.data(), kGapped, 23), std::invalid_argument);
}

TEST(KernelsGrad, IdempotentKernelsSkipAllZeroModesWithSameResult) {
  // Output and inputs all stride 0 on the middle leaf: writing the same slot
  // again with the same value; the result matches the reference.
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
  const Leaves la = {{2, 1}, {5, 0}, {2, 2}};
  const Leaves lo = {{2, 1}, {5, 0}, {2, 2}};
  std::vector<float> out(4, 0.0f);
  K::add(DTypeCode::Float32, a.data(), la, b.data(), la, out.data(), lo);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  K::relu(DTypeCode::Float32, b.data(), la, out.data(), lo);
  EXPECT_EQ(out, b);
  // Summing kernels still count the repeats.
  EXPECT_EQ(K::sum_f32(a.data(), la), 50.0);
  std::vector<double> acc(4, 0.0);
  K::sum_into(a.data(), la, acc.data(), lo);
  EXPECT_EQ(acc, (std::vector<double>{5, 10, 15, 20}));
}

TEST(KernelsGrad, StridedCopyStrideZeroOnBothSidesAndLastWriteWins) {
  std::vector<int32_t> src = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> dst(3, 0);
  // Middle mode stride 0 on both sides: repeats one copy.
  sw::strided_copy(dst.data(), 0, {1, 0, 0}, src.data(), 0, {1, 0, 0}, {3, 4, 1}, 4);
  EXPECT_EQ(dst, (std::vector<int32_t>{1, 2, 3}));
  // Destination stride 0 only: the last source element of each run wins.
  std::vector<int32_t> one(2, 0);
  sw::strided_copy(one.data(), 0, {0, 1}, src.data(), 0, {1, 3}, {3, 2}, 4);
  EXPECT_EQ(one, (std::vector<int32_t>{3, 6}));
}

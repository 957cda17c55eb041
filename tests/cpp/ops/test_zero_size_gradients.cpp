// Zero-size layouts (an extent-0 leaf, as DLPack imports of empty arrays
// have) in the gradient rules: no index repeats, so nothing is summed and a
// multiplication by a number plans like any other (it threw "the gradient's
// shape does not match" because the empty layout's stride-0 leaves looked
// like broadcast modes).
#include <gtest/gtest.h>

#include <vector>

#include "layout/algebra.hpp"
#include "ops/rules.hpp"
#include "builders.hpp"

using swtest::layout;
using sw::Layout;
namespace ops = sw::ops;

TEST(ZeroSizeGradients, AnEmptyLayoutRepeatsNoIndex) {
  EXPECT_FALSE(sw::has_stride_zero(layout({0, 3}, {0, 0}).leaves()));
  EXPECT_FALSE(sw::has_stride_zero(layout({3, 0}, {0, 0}).leaves()));
  EXPECT_FALSE(layout({0}, {0}).has_stride_zero());
  EXPECT_TRUE(sw::has_stride_zero(layout({2, 3}, {1, 0}).leaves()));  // a broadcast mode still is one
}

TEST(ZeroSizeGradients, MulByANumberPlansWithoutSumming) {
  for (const Layout& x : {layout({0, 3}, {0, 0}), layout({3, 0}, {0, 0}), layout({0}, {0})}) {
    const ops::MulGradPlan p = ops::plan_mul_grad(x, x, nullptr);
    EXPECT_FALSE(p.reduce);
    EXPECT_EQ(p.layout.size(), 0);
    float out[1] = {7};
    ops::mul_grad_host(p, nullptr, x.leaves(), nullptr, 2.0, out);  // no element: nothing read or written
    EXPECT_EQ(out[0], 7);
  }
}

TEST(ZeroSizeGradients, ReduceToAnEmptyInputSumsNothing) {
  const Layout x = layout({0, 3}, {0, 0});
  const ops::ReducePlan p = ops::plan_reduce_to(layout({0, 3}, {1, 0}), x);
  EXPECT_FALSE(p.reduce);
}

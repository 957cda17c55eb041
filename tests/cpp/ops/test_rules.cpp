// GoogleTest for the differentiable operations' rules and host computation
// (csrc/engine/ops/rules.hpp): operand and pair rules, forward
// plans, gradient plans with their kernels, and accumulation plans.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "layout/algebra.hpp"
#include "ops/rules.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using swtest::layout;
using sw::DTypeCode;
using sw::IntTree;
using sw::Layout;
namespace ops = sw::ops;

TEST(OpRules, OperandDtypes) {
  EXPECT_TRUE(ops::computes(DTypeCode::Float32, true));
  EXPECT_TRUE(ops::computes(DTypeCode::Int32, true));
  EXPECT_FALSE(ops::computes(DTypeCode::Floating, true));
  EXPECT_FALSE(ops::computes(DTypeCode::Bool, true));
  EXPECT_TRUE(ops::computes(DTypeCode::Any, false));
  EXPECT_TRUE(ops::computes(DTypeCode::Floating, false));
  EXPECT_TRUE(ops::computes(DTypeCode::Int32, false));
  EXPECT_FALSE(ops::computes(DTypeCode::Bool, false));
  EXPECT_FALSE(ops::computes(DTypeCode::Compound, false));
}

TEST(OpRules, PairFit) {
  EXPECT_EQ(ops::pair_fit(true, DTypeCode::Float32, DTypeCode::Float32), ops::PairFit::Ok);
  EXPECT_EQ(ops::pair_fit(false, DTypeCode::Float32, DTypeCode::Float32), ops::PairFit::ClassDiffers);
  EXPECT_EQ(ops::pair_fit(false, DTypeCode::Float32, DTypeCode::Int32), ops::PairFit::ClassDiffers);
  EXPECT_EQ(ops::pair_fit(true, DTypeCode::Float32, DTypeCode::Int32), ops::PairFit::DtypeDiffers);
  EXPECT_EQ(ops::pair_fit(true, DTypeCode::Compound, DTypeCode::Compound), ops::PairFit::DtypeDiffers);
}

TEST(OpRules, ScalarFits) {
  EXPECT_TRUE(ops::scalar_fits(DTypeCode::Float32, false));
  EXPECT_TRUE(ops::scalar_fits(DTypeCode::Int32, true));
  EXPECT_FALSE(ops::scalar_fits(DTypeCode::Int32, false));
}

TEST(OpRules, BinaryPlanBroadcastsExtentOneLeaves) {
  const Layout a = layout({3, 1}, {1, 0});
  const Layout b = layout({1, 4}, {0, 1});
  const ops::BinaryPlan p = ops::plan_binary(a, b);
  EXPECT_EQ(p.out, sw::compact(N({L(3), L(4)})));
  ASSERT_EQ(p.a.size(), 2u);
  EXPECT_EQ(p.a[1].stride, 0);
  EXPECT_EQ(p.b[0].stride, 0);
  EXPECT_EQ(p.b[1].stride, 1);
  EXPECT_NE(swtest::invalid_argument_message([&] { ops::plan_binary(layout({3}, {1}), layout({4}, {1})); }), "<no exception>");
}

TEST(OpRules, BinaryAndScalarHostForward) {
  const Layout a = layout({2, 1}, {1, 0});
  const Layout b = layout({1, 3}, {0, 1});
  const ops::BinaryPlan p = ops::plan_binary(a, b);
  const float av[] = {1, 2}, bv[] = {10, 20, 30};
  float out[6] = {};
  ops::binary_host(ops::Binary::Add, DTypeCode::Float32, av, bv, p, out);
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{11, 12, 21, 22, 31, 32}));
  ops::binary_host(ops::Binary::Mul, DTypeCode::Float32, av, bv, p, out);
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{10, 20, 20, 40, 30, 60}));

  const Layout x = layout({3}, {2});  // gapped source
  const int32_t xi[] = {1, -1, 2, -1, 3};
  int32_t oi[3] = {};
  const Layout o = ops::unary_out(x);
  EXPECT_EQ(o, layout({3}, {1}));
  ops::mul_scalar_host(DTypeCode::Int32, xi, x.leaves(), 0, -4, oi, o);
  EXPECT_EQ(std::vector<int32_t>(oi, oi + 3), (std::vector<int32_t>{-4, -8, -12}));
  EXPECT_THROW(ops::mul_scalar_host(DTypeCode::Int32, xi, x.leaves(), 0, int64_t{1} << 40, oi, o),
               std::overflow_error);
  EXPECT_THROW(ops::mul_scalar_host(DTypeCode::Bool, xi, x.leaves(), 1, 1, oi, o), std::invalid_argument);
  EXPECT_EQ(ops::reduction_out().size(), 1);
  EXPECT_EQ(ops::reduction_out().shape(), N({}));
}

TEST(OpRules, ReduceToPassesThroughTheOwnLayout) {
  const Layout x = layout({2, 3}, {1, 2});
  const ops::ReducePlan p = ops::plan_reduce_to(x, x);
  EXPECT_TRUE(p.passthrough);
  EXPECT_THROW(ops::reduce_to_host(p, nullptr, x.leaves(), nullptr), std::logic_error);
}

TEST(OpRules, ReduceToSumsBroadcastLeaves) {
  // x: (2, 1) widened to g: (2, 3); the gradient sums over the 3.
  const Layout x = layout({2, 1}, {1, 0});
  const Layout g = layout({2, 3}, {1, 2});
  const ops::ReducePlan p = ops::plan_reduce_to(g, x);
  EXPECT_FALSE(p.passthrough);
  EXPECT_TRUE(p.reduce);
  EXPECT_FALSE(p.zero_fill);  // the summing pass writes every slot
  EXPECT_EQ(p.slots(), 2);
  const float gv[] = {1, 2, 3, 4, 5, 6};
  float out[2] = {-1, -1};
  ops::reduce_to_host(p, gv, g.leaves(), out);
  EXPECT_EQ(out[0], 1 + 3 + 5);
  EXPECT_EQ(out[1], 2 + 4 + 6);
  EXPECT_EQ(swtest::invalid_argument_message([&] { ops::plan_reduce_to(layout({4}, {1}), layout({3}, {1})); }),
            "the gradient's shape does not match the input's shape");
}

TEST(OpRules, ReduceToRelayoutsIntoAGappedLayout) {
  // x is injective but gapped (stride 2): the relayout reaches every other
  // slot, so the holes must start zeroed.
  const Layout x = layout({3}, {2});
  const Layout g = layout({3}, {1});
  const ops::ReducePlan p = ops::plan_reduce_to(g, x);
  EXPECT_FALSE(p.reduce);
  EXPECT_TRUE(p.zero_fill);
  EXPECT_EQ(p.slots(), 5);
  const float gv[] = {7, 8, 9};
  float out[5] = {0, 0, 0, 0, 0};
  ops::reduce_to_host(p, gv, g.leaves(), out);
  EXPECT_EQ(std::vector<float>(out, out + 5), (std::vector<float>{7, 0, 8, 0, 9}));
}

TEST(OpRules, MulGradPlans) {
  const Layout x = layout({2, 1}, {1, 0});
  const Layout y = layout({1, 3}, {0, 1});
  const Layout g = layout({2, 3}, {1, 2});
  const ops::MulGradPlan px = ops::plan_mul_grad(g, x, &y);
  EXPECT_TRUE(px.reduce);
  const float gv[] = {1, 1, 1, 1, 1, 1}, yv[] = {1, 2, 3}, xv[] = {5, 7};
  float out[3] = {};
  ops::mul_grad_host(px, gv, g.leaves(), yv, 0, out);
  EXPECT_EQ(out[0], 6);
  EXPECT_EQ(out[1], 6);
  const ops::MulGradPlan py = ops::plan_mul_grad(g, y, &x);
  ops::mul_grad_host(py, gv, g.leaves(), xv, 0, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{12, 12, 12}));
  // By a number: g * s, and nothing may be summed.
  const Layout v = layout({3}, {1});
  const ops::MulGradPlan ps = ops::plan_mul_grad(v, v, nullptr);
  EXPECT_FALSE(ps.reduce);
  EXPECT_TRUE(ps.other.empty());
  ops::mul_grad_host(ps, yv, v.leaves(), nullptr, 0.5, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{0.5f, 1, 1.5f}));
  EXPECT_EQ(swtest::invalid_argument_message([&] { ops::plan_mul_grad(layout({3}, {1}), layout({1}, {0}), nullptr); }),
            "the gradient's shape does not match the input's shape");
}

TEST(OpRules, ReluGradPlan) {
  const Layout x = layout({4}, {1});
  const ops::GradPlan p = ops::plan_relu_grad(x, x);
  const float gv[] = {1, 2, 3, 4}, xv[] = {-1, 0, 2, 5};
  float out[4] = {};
  ops::relu_grad_host(p, gv, x.leaves(), xv, x.leaves(), out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{0, 0, 3, 4}));
  EXPECT_EQ(swtest::invalid_argument_message([&] { ops::plan_relu_grad(layout({3}, {1}), x); }),
            "the gradient's shape does not match the input's shape");
  // A broadcast input gets a compact gradient.
  const ops::GradPlan pb = ops::plan_relu_grad(layout({2, 2}, {1, 2}), layout({2, 2}, {0, 1}));
  EXPECT_EQ(pb.layout, sw::compact(N({L(2), L(2)})));
  EXPECT_FALSE(pb.zero_fill);
}

TEST(OpRules, ReduceSumGradPlanRepeatsTheOneValue) {
  const Layout g = layout({1}, {0});
  const Layout x = layout({2, 2}, {2, 1});
  const ops::FillPlan p = ops::plan_reduce_sum_grad(g, x);
  EXPECT_EQ(p.source, 0);
  EXPECT_EQ(p.layout, x);
  const float gv[] = {2.5f};
  float out[4] = {};
  ops::reduce_sum_grad_host(p, gv, out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f}));
  // A broadcast input gets a compact gradient, every slot filled.
  const ops::FillPlan wide = ops::plan_reduce_sum_grad(g, layout({3}, {0}));
  EXPECT_EQ(wide.layout, layout({3}, {1}));
  EXPECT_FALSE(wide.zero_fill);
  EXPECT_EQ(swtest::invalid_argument_message([&] { ops::plan_reduce_sum_grad(layout({2}, {1}), x); }),
            "the gradient must hold exactly one element");
}

TEST(OpRules, AccumulationPlans) {
  const Layout own = layout({3}, {1});
  const ops::AccumulationPlan p = ops::plan_accumulation(own, 2);
  EXPECT_TRUE(p.own_layout);
  EXPECT_FALSE(p.zero_fill);
  const Layout gapped = layout({3}, {2});
  EXPECT_TRUE(ops::plan_accumulation(gapped, 1).zero_fill);
  EXPECT_TRUE(ops::plan_accumulation(gapped, sw::kernels::kDirectSources).zero_fill);
  EXPECT_FALSE(ops::plan_accumulation(gapped, sw::kernels::kDirectSources + 1).zero_fill);
  const ops::AccumulationPlan b = ops::plan_accumulation(layout({3}, {0}), 3);
  EXPECT_FALSE(b.own_layout);
  EXPECT_EQ(b.layout, own);
}

#include "ops/rules.hpp"

#include <stdexcept>

#include "autograd/graph.hpp"
#include "layout/algebra.hpp"

namespace sw::ops {

namespace K = sw::kernels;

bool computes(DTypeCode dtype, bool host_path) {
  if (host_path) return K::supports(dtype);
  return dtype == DTypeCode::Any || dtype == DTypeCode::Floating || dtype == DTypeCode::Float32 ||
         dtype == DTypeCode::Int32;
}

PairFit pair_fit(bool same_class, DTypeCode a, DTypeCode b) {
  if (!same_class) return PairFit::ClassDiffers;
  if (a != b || a == DTypeCode::Compound) return PairFit::DtypeDiffers;
  return PairFit::Ok;
}

BinaryPlan plan_binary(const Layout& a, const Layout& b) {
  const IntTree shape = broadcast_shapes(a.shape(), b.shape());
  return {compact(shape), a.broadcast_to(shape).leaves(), b.broadcast_to(shape).leaves()};
}

Layout unary_out(const Layout& a) { return compact(a.shape()); }

Layout reduction_out() { return compact(IntTree::node({})); }

void binary_host(Binary kind, DTypeCode dtype, const void* a, const void* b, const BinaryPlan& plan, void* out) {
  if (kind == Binary::Add)
    K::add(dtype, a, plan.a, b, plan.b, out, plan.out.leaves());
  else
    K::mul(dtype, a, plan.a, b, plan.b, out, plan.out.leaves());
}

void mul_scalar_host(DTypeCode dtype, const void* a, const Leaves& la, double s, int64_t s_int, void* out,
                     const Layout& out_layout) {
  if (dtype == DTypeCode::Float32)
    K::mul_scalar_f32(static_cast<const float*>(a), la, s, static_cast<float*>(out), out_layout.leaves());
  else if (dtype == DTypeCode::Int32)
    K::mul_scalar_i32(static_cast<const int32_t*>(a), la, s_int, static_cast<int32_t*>(out), out_layout.leaves());
  else
    throw std::invalid_argument("mul by a number computes Float32 and Int32 only");
}

void add_scalar_host(DTypeCode dtype, const void* a, const Leaves& la, double s, int64_t s_int, void* out,
                     const Layout& out_layout) {
  if (dtype == DTypeCode::Float32)
    K::add_scalar_f32(static_cast<const float*>(a), la, s, static_cast<float*>(out), out_layout.leaves());
  else if (dtype == DTypeCode::Int32)
    K::add_scalar_i32(static_cast<const int32_t*>(a), la, s_int, static_cast<int32_t*>(out), out_layout.leaves());
  else
    throw std::invalid_argument("add of a number computes Float32 and Int32 only");
}

namespace {

// A plan writing x's gradient layout through its own leaves (no summing);
// the holes of a gapped layout start zeroed.
void elementwise_plan(GradPlan& p, const Layout& x) {
  p.layout = gradient_layout(x);
  p.target = p.layout.leaves();
  p.reduce = false;
  p.zero_fill = autograd::needs_zero_fill(false, p.layout.size(), p.layout.cosize());
}

void require_same_shape(const Layout& g, const Layout& x) {
  if (!(g.shape() == x.shape()))
    throw std::invalid_argument("the gradient's shape does not match the input's shape");
}

}  // namespace

ReducePlan plan_reduce_to(const Layout& g, const Layout& x) {
  ReducePlan p;
  p.layout = gradient_layout(x);
  p.passthrough = g == p.layout;
  if (p.passthrough) {
    p.reduce = false;
    p.zero_fill = false;
    return p;
  }
  p.target = reduction_leaves(g, x, p.layout);
  p.reduce = has_stride_zero(p.target);
  // The summing pass writes every slot; a plain relayout only the reached.
  p.zero_fill = autograd::needs_zero_fill(p.reduce, p.layout.size(), p.layout.cosize());
  return p;
}

void reduce_to_host(const ReducePlan& p, const float* g, const Leaves& lg, float* out) {
  if (p.passthrough) throw std::logic_error("reduce_to_host: the cotangent is the gradient");
  if (p.reduce)
    K::broadcast_sum_backward(g, lg, out, p.target, p.slots());
  else
    K::copy(DTypeCode::Float32, g, lg, out, p.target);
}

MulGradPlan plan_mul_grad(const Layout& g, const Layout& x, const Layout* other) {
  MulGradPlan p;
  p.layout = gradient_layout(x);
  if (other) p.other = other->broadcast_to(g.shape()).leaves();
  p.target = reduction_leaves(g, x, p.layout);
  p.reduce = has_stride_zero(p.target);
  p.zero_fill = autograd::needs_zero_fill(false, p.layout.size(), p.layout.cosize());
  // A number multiplies coordinate by coordinate: nothing may be summed.
  if (p.reduce && !other) throw std::invalid_argument("the gradient's shape does not match the input's shape");
  return p;
}

void mul_grad_host(const MulGradPlan& p, const float* g, const Leaves& lg, const float* other, double s,
                   float* out) {
  if (p.reduce)
    K::mul_broadcast_backward(g, lg, other, p.other, out, p.target, p.slots());
  else if (other)
    K::mul(DTypeCode::Float32, g, lg, other, p.other, out, p.target);
  else
    K::mul_scalar_f32(g, lg, s, out, p.target);
}

GradPlan plan_relu_grad(const Layout& g, const Layout& x) {
  require_same_shape(g, x);
  GradPlan p;
  elementwise_plan(p, x);
  return p;
}

void relu_grad_host(const GradPlan& p, const float* g, const Leaves& lg, const float* x, const Leaves& lx,
                    float* out) {
  K::relu_backward(g, lg, x, lx, out, p.target);
}

FillPlan plan_reduce_sum_grad(const Layout& g, const Layout& x) {
  if (g.size() != 1) throw std::invalid_argument("the gradient must hold exactly one element");
  FillPlan p;
  elementwise_plan(p, x);
  p.fill = broadcast_one(p.target);
  p.source = g.index_of_ordinal(0);
  return p;
}

void reduce_sum_grad_host(const FillPlan& p, const float* g, float* out) {
  K::copy(DTypeCode::Float32, g + p.source, p.fill, out, p.target);
}

AccumulationPlan plan_accumulation(const Layout& target, size_t sources) {
  AccumulationPlan p;
  p.layout = gradient_layout(target);
  p.own_layout = p.layout == target;
  // The direct sums write only the slots the layout reaches.
  p.zero_fill = sources <= K::kDirectSources && p.layout.cosize() != p.layout.size();
  return p;
}

}  // namespace sw::ops

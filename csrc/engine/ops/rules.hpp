// Rules and host computation of the differentiable operations (add, mul,
// relu, reduce_sum, broadcast_to) and of gradient accumulation, on layouts
// and raw host buffers: which operands an operation takes, the result
// layout, the gradient layout of each input with the leaves that carry the
// cotangent onto it, and which kernel computes a result. The binding checks
// its Python objects, calls these, and computes value by value with the
// same plans when the storage is not native host memory.
//
// Errors: std::invalid_argument (ValueError in Python) with the message the
// binding prefixes with "op(): " or "op backward: ".
#pragma once
#include <cstdint>
#include <vector>

#include "dtype/dtype.hpp"
#include "layout/layout.hpp"
#include "ops/kernels.hpp"

namespace sw::ops {

using Leaves = std::vector<LeafMode>;

// ------------------------------------------------------------ operands

// Whether an operand of dtype computes: the host kernels take their dtypes
// (Float32, Int32); the values path also takes Any and Floating.
bool computes(DTypeCode dtype, bool host_path);

// Two operands of a binary operation: one carrier class and one
// non-compound dtype.
enum class PairFit { Ok, ClassDiffers, DtypeDiffers };
PairFit pair_fit(bool same_class, DTypeCode a, DTypeCode b);

// The Python number multiplying a tensor: an Int32 tensor takes only an int.
inline bool scalar_fits(DTypeCode dtype, bool is_int) { return dtype != DTypeCode::Int32 || is_int; }

// ------------------------------------------------------------ forward

// Result layout (compact over the broadcast shape) of an elementwise binary
// operation and each operand's leaves over it. std::invalid_argument when
// the shapes do not broadcast.
struct BinaryPlan {
  Layout out;
  Leaves a, b;
};
BinaryPlan plan_binary(const Layout& a, const Layout& b);
// Result layout of an elementwise unary operation (mul by a number, relu):
// compact over the operand's shape.
Layout unary_out(const Layout& a);
// Result layout of reduce_sum: rank 0.
Layout reduction_out();

enum class Binary { Add, Mul };
// Host forward of a binary operation into out (plan.out slots of dtype).
void binary_host(Binary kind, DTypeCode dtype, const void* a, const void* b, const BinaryPlan& plan, void* out);
// Host forward of mul by a number: Float32 takes s as a double, Int32 as an
// int64 (s_int; overflow_error when the product leaves Int32).
void mul_scalar_host(DTypeCode dtype, const void* a, const Leaves& la, double s, int64_t s_int, void* out,
                     const Layout& out_layout);
// Host forward of add of a number, with the same argument rules.
void add_scalar_host(DTypeCode dtype, const void* a, const Leaves& la, double s, int64_t s_int, void* out,
                     const Layout& out_layout);

// ------------------------------------------------------------ gradients

// The gradient of an input of layout x from a cotangent of layout g: the
// gradient layout, the leaves over g's coordinates that write into it, and
// how its buffer is produced.
struct GradPlan {
  Layout layout;      // gradient_layout(x)
  Leaves target;      // over g's coordinates into layout; stride 0 where summed
  bool reduce = false; // some broadcast leaf is summed over
  bool zero_fill = false; // the fresh buffer's holes must start zeroed
  int64_t slots() const { return layout.cosize(); }
};

// add and broadcast_to: the cotangent summed onto x's gradient layout.
// passthrough: g already is in that layout and is the gradient itself.
struct ReducePlan : GradPlan {
  bool passthrough = false;
};
ReducePlan plan_reduce_to(const Layout& g, const Layout& x);
// Host: the ReducePlan's buffer (not for a passthrough).
void reduce_to_host(const ReducePlan& p, const float* g, const Leaves& lg, float* out);

// mul: g * other (other broadcast over g's extents) or g * a number (other
// NULL; then g must have x's shape).
struct MulGradPlan : GradPlan {
  Leaves other;  // other's leaves over g's extents (empty for a number)
};
MulGradPlan plan_mul_grad(const Layout& g, const Layout& x, const Layout* other);
// Host: other NULL multiplies by s.
void mul_grad_host(const MulGradPlan& p, const float* g, const Leaves& lg, const float* other, double s, float* out);

// relu: g where x > 0 (g and x of one shape).
GradPlan plan_relu_grad(const Layout& g, const Layout& x);
void relu_grad_host(const GradPlan& p, const float* g, const Leaves& lg, const float* x, const Leaves& lx,
                    float* out);

// reduce_sum: the one cotangent value (at g's scalar index source) repeated
// over x's extents (fill reads one slot everywhere).
struct FillPlan : GradPlan {
  Leaves fill;
  int64_t source = 0;
};
FillPlan plan_reduce_sum_grad(const Layout& g, const Layout& x);
void reduce_sum_grad_host(const FillPlan& p, const float* g, float* out);

// ------------------------------------------------------------ accumulation

// Summing gradients of shape target's into target's gradient layout.
struct AccumulationPlan {
  Layout layout;    // gradient_layout(target)
  bool own_layout = false;  // layout == target
  bool zero_fill = false;   // the host sum leaves holes unwritten
};
AccumulationPlan plan_accumulation(const Layout& target, size_t sources);

}  // namespace sw::ops

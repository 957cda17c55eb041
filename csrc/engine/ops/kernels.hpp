// Native strided elementwise kernels for the differentiable operations.
//
// Coordinates are walked by the one walker of layout/iter.hpp (contiguous modes
// merged into long runs). Every operand is a base pointer (already advanced by
// the tensor's offset) plus its depth-first list of leaf modes. All operands of
// one call iterate the same coordinate space: their leaf lists have the same
// length and the same extents leaf by leaf (a broadcast operand carries stride
// 0 on its widened leaves). Coordinates are visited first-leaf-fastest, so a
// compact (canonical) output's slot equals the coordinate's flat ordinal.
// Output leaf lists may be gapped (holes are left untouched) and, for the
// summing kernels only, may repeat indices (stride 0): values landing on one
// slot are added. Kernels throw std::invalid_argument when the leaf lists
// disagree, std::overflow_error when an Int32 result leaves the Int32 range
// (nothing useful is left in the output then), and never touch Python.
#pragma once
#include <cstdint>
#include <vector>

#include "dtype/dtype.hpp"
#include "layout/layout.hpp"

namespace sw::kernels {

using Leaves = std::vector<LeafMode>;

// Logical element count of a leaf list (product of extents; 1 when empty).
int64_t element_count(const Leaves& leaves);

// True when dtype is one the arithmetic kernels accept (Float32, Int32).
bool supports(DTypeCode dtype);

// out[o] = src[s]: a strided copy; with a compact dst it is a gather.
void copy(DTypeCode dtype, const void* src, const Leaves& ls, void* dst, const Leaves& ld);
// Gathers src into a compact buffer of element_count(ls) slots.
void gather(DTypeCode dtype, const void* src, const Leaves& ls, void* dst);

// Constructors (strideweave.zeros/ones/full/arange) on fresh compact storage.
// fill: n slots of itemsize bytes, each a copy of the item at value.
void fill(void* out, int64_t n, int itemsize, const void* value);
// out[i] = start + i * step for i < n. Float32: formed in double and
// rounded once (every value is the nearest binary32 of the exact one);
// Int32: the caller checked that every value fits.
void arange_f32(float* out, int64_t n, double start, double step);
void arange_i32(int32_t* out, int64_t n, int64_t start, int64_t step);
// The element count of arange(start, stop, step) (NumPy's
// ceil((stop - start) / step), 0 when the range is empty); step != 0.
// Throws std::overflow_error when the count does not fit int64.
int64_t arange_count(double start, double stop, double step);
int64_t arange_count(int64_t start, int64_t stop, int64_t step);

// Elementwise binary arithmetic: out = a + b, out = a * b. Float32 results
// are rounded to binary32 (the float operation itself), Int32 results are
// range checked.
void add(DTypeCode dtype, const void* a, const Leaves& la, const void* b, const Leaves& lb,
         void* out, const Leaves& lo);
void mul(DTypeCode dtype, const void* a, const Leaves& la, const void* b, const Leaves& lb,
         void* out, const Leaves& lo);

// out = a * s. Float32: the product is formed in double and rounded once to
// binary32 (what a Python float product stored into a Float32 slot gives).
// Int32: s is an integer; the product is range checked.
void mul_scalar_f32(const float* a, const Leaves& la, double s, float* out, const Leaves& lo);
void mul_scalar_i32(const int32_t* a, const Leaves& la, int64_t s, int32_t* out, const Leaves& lo);
// out = a + s, with the rules of mul by a number (Float32: the sum formed in
// double, rounded once; Int32: range checked).
void add_scalar_f32(const float* a, const Leaves& la, double s, float* out, const Leaves& lo);
void add_scalar_i32(const int32_t* a, const Leaves& la, int64_t s, int32_t* out, const Leaves& lo);

// out = max(0, x); a NaN input stays NaN, -0.0 becomes +0.0.
void relu(DTypeCode dtype, const void* x, const Leaves& lx, void* out, const Leaves& lo);
// out = g * (x > 0): the relu cotangent mask (NaN counts as not positive).
void relu_backward(const float* g, const Leaves& lg, const float* x, const Leaves& lx, float* out,
                   const Leaves& lo);

// Sum of every logical value (a broadcast operand counts each coordinate),
// accumulated in double (Float32) or exactly in int64 (Int32).
double sum_f32(const float* x, const Leaves& lx);
int64_t sum_i32(const int32_t* x, const Leaves& lx);

// The one slot of a rank-0 result: the sum of x rounded to binary32
// (Float32) or range checked (Int32; std::overflow_error).
void reduce_sum(DTypeCode dtype, const void* x, const Leaves& lx, void* out);

// acc[o] += g[s] in double for every coordinate; lo may carry stride 0 on
// the leaves a broadcast widened, which sums them together.
void sum_into(const float* g, const Leaves& lg, double* acc, const Leaves& lo);
// out[i] = (float)acc[i] for i < n.
void round_to_f32(const double* acc, float* out, int64_t n);
// The broadcast backward: zero-fills out_slots slots of out, then sums g onto
// out through lo (stride 0 on broadcast leaves) with double accumulation and
// one final rounding per slot.
void broadcast_sum_backward(const float* g, const Leaves& lg, float* out, const Leaves& lo,
                            int64_t out_slots);

// The mul backward over broadcast leaves: out = sum over lo's stride-0
// leaves of g * y (y read through ly, over g's extents), each product
// rounded to binary32 first, the sum accumulated in double and rounded once
// per slot; out_slots slots of out are written (zero where nothing lands).
void mul_broadcast_backward(const float* g, const Leaves& lg, const float* y, const Leaves& ly, float* out,
                            const Leaves& lo, int64_t out_slots);

// Gradient accumulation: out (laid out by lo, out_slots slots) = the sum of
// every source over lo's extents. One source is copied and two are added in
// binary32 (both exact to one rounding), touching only the slots lo reaches;
// more sources accumulate in double, round once, and write all out_slots
// slots (holes become 0).
struct Source {
  const float* data;
  const Leaves* leaves;
};
constexpr size_t kDirectSources = 2;
void sum_sources(const std::vector<Source>& sources, float* out, const Leaves& lo, int64_t out_slots);

}  // namespace sw::kernels

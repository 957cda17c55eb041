// Native strided elementwise kernels (see kernels.hpp for the contract).
#include "kernels.hpp"

#include "strided_copy.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace sw::kernels {

namespace {

// The joint iteration space of K operands after dropping extent-1 leaves and
// merging neighbours that are contiguous for every operand (so a compact
// layout becomes one long unit-stride loop).
template <size_t K>
struct Plan {
  bool empty = false;
  std::vector<int64_t> extent;
  std::vector<std::array<int64_t, K>> stride;
};

template <size_t K>
Plan<K> make_plan(const std::array<const Leaves*, K>& ls) {
  Plan<K> p;
  const size_t n = ls[0]->size();
  for (size_t k = 1; k < K; ++k) {
    if (ls[k]->size() != n)
      throw std::invalid_argument("kernel operands have different numbers of leaf modes");
    for (size_t d = 0; d < n; ++d)
      if ((*ls[k])[d].extent != (*ls[0])[d].extent)
        throw std::invalid_argument("kernel operands have different extents at leaf " +
                                    std::to_string(d));
  }
  for (size_t d = 0; d < n; ++d) {
    const int64_t e = (*ls[0])[d].extent;
    if (e <= 0) { p.empty = true; return p; }
    if (e == 1) continue;
    std::array<int64_t, K> s;
    for (size_t k = 0; k < K; ++k) s[k] = (*ls[k])[d].stride;
    if (!p.extent.empty()) {
      const int64_t pe = p.extent.back();
      const auto& ps = p.stride.back();
      bool merge = true;
      for (size_t k = 0; k < K; ++k)
        if (s[k] != ps[k] * pe) { merge = false; break; }
      if (merge) { p.extent.back() *= e; continue; }
    }
    p.extent.push_back(e);
    p.stride.push_back(s);
  }
  return p;
}

// Calls f(idx) with the K scalar indices of every coordinate, first leaf
// fastest.
template <size_t K, class F>
void run(const Plan<K>& p, F&& f) {
  if (p.empty) return;
  std::array<int64_t, K> base{};
  const size_t n = p.extent.size();
  if (n == 0) { f(base); return; }
  const int64_t e0 = p.extent[0];
  const std::array<int64_t, K> s0 = p.stride[0];
  std::vector<int64_t> coord(n, 0);
  for (;;) {
    std::array<int64_t, K> idx = base;
    for (int64_t j = 0; j < e0; ++j) {
      f(idx);
      for (size_t k = 0; k < K; ++k) idx[k] += s0[k];
    }
    size_t d = 1;
    for (; d < n; ++d) {
      if (++coord[d] < p.extent[d]) {
        for (size_t k = 0; k < K; ++k) base[k] += p.stride[d][k];
        break;
      }
      for (size_t k = 0; k < K; ++k) base[k] -= p.stride[d][k] * (p.extent[d] - 1);
      coord[d] = 0;
    }
    if (d == n) return;
  }
}


int32_t checked_i32(int64_t v) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw std::overflow_error("Int32 result out of range");
  return static_cast<int32_t>(v);
}

void require_arith(DTypeCode dtype) {
  if (!supports(dtype)) throw std::invalid_argument("kernel supports only Float32 and Int32");
}

template <class T, class Op>
void binary(const void* a, const Leaves& la, const void* b, const Leaves& lb, void* out,
            const Leaves& lo, Op op) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  T* po = static_cast<T*>(out);
  auto plan = make_plan<3>({&la, &lb, &lo});
  run(plan, [&](const std::array<int64_t, 3>& i) { po[i[2]] = op(pa[i[0]], pb[i[1]]); });
}

}  // namespace

Leaves compact_of(const Leaves& ls) {
  Leaves out;
  out.reserve(ls.size());
  int64_t stride = 1;
  for (const auto& m : ls) {
    out.push_back({m.extent, stride});
    stride *= m.extent;
  }
  return out;
}

int64_t element_count(const Leaves& leaves) {
  int64_t n = 1;
  for (const auto& m : leaves) n *= m.extent;
  return n;
}

bool supports(DTypeCode dtype) { return dtype == DTypeCode::Float32 || dtype == DTypeCode::Int32; }

void copy(DTypeCode dtype, const void* src, const Leaves& ls, void* dst, const Leaves& ld) {
  if (dtype != DTypeCode::Float32 && dtype != DTypeCode::Int32 && dtype != DTypeCode::Bool)
    throw std::invalid_argument("copy supports only Float32, Int32 and Bool");
  if (ls.size() != ld.size()) throw std::invalid_argument("copy needs one leaf mode per side");
  // The movement engine's strided copy does the walking (one implementation).
  std::vector<int64_t> extents, src_strides, dst_strides;
  for (size_t k = 0; k < ls.size(); ++k) {
    if (ls[k].extent != ld[k].extent) throw std::invalid_argument("copy needs equal extents");
    extents.push_back(ls[k].extent);
    src_strides.push_back(ls[k].stride);
    dst_strides.push_back(ld[k].stride);
  }
  strided_copy(dst, 0, dst_strides, src, 0, src_strides, extents, itemsize(dtype));
}

void gather(DTypeCode dtype, const void* src, const Leaves& ls, void* dst) {
  copy(dtype, src, ls, dst, compact_of(ls));
}

void add(DTypeCode dtype, const void* a, const Leaves& la, const void* b, const Leaves& lb,
         void* out, const Leaves& lo) {
  require_arith(dtype);
  if (dtype == DTypeCode::Float32)
    binary<float>(a, la, b, lb, out, lo, [](float x, float y) { return x + y; });
  else
    binary<int32_t>(a, la, b, lb, out, lo, [](int32_t x, int32_t y) {
      return checked_i32(static_cast<int64_t>(x) + y);
    });
}

void mul(DTypeCode dtype, const void* a, const Leaves& la, const void* b, const Leaves& lb,
         void* out, const Leaves& lo) {
  require_arith(dtype);
  if (dtype == DTypeCode::Float32)
    binary<float>(a, la, b, lb, out, lo, [](float x, float y) { return x * y; });
  else
    binary<int32_t>(a, la, b, lb, out, lo, [](int32_t x, int32_t y) {
      return checked_i32(static_cast<int64_t>(x) * y);
    });
}

void mul_scalar_f32(const float* a, const Leaves& la, double s, float* out, const Leaves& lo) {
  auto plan = make_plan<2>({&la, &lo});
  run(plan, [&](const std::array<int64_t, 2>& i) {
    out[i[1]] = static_cast<float>(static_cast<double>(a[i[0]]) * s);
  });
}

void mul_scalar_i32(const int32_t* a, const Leaves& la, int64_t s, int32_t* out, const Leaves& lo) {
  auto plan = make_plan<2>({&la, &lo});
  run(plan, [&](const std::array<int64_t, 2>& i) {
    int64_t r;
    if (__builtin_mul_overflow(static_cast<int64_t>(a[i[0]]), s, &r))
      throw std::overflow_error("Int32 result out of range");
    out[i[1]] = checked_i32(r);
  });
}

void relu(DTypeCode dtype, const void* x, const Leaves& lx, void* out, const Leaves& lo) {
  require_arith(dtype);
  auto plan = make_plan<2>({&lx, &lo});
  if (dtype == DTypeCode::Float32) {
    const float* px = static_cast<const float*>(x);
    float* po = static_cast<float*>(out);
    run(plan, [&](const std::array<int64_t, 2>& i) {
      const float v = px[i[0]];
      po[i[1]] = (v > 0.0f || std::isnan(v)) ? v : 0.0f;
    });
  } else {
    const int32_t* px = static_cast<const int32_t*>(x);
    int32_t* po = static_cast<int32_t*>(out);
    run(plan, [&](const std::array<int64_t, 2>& i) { po[i[1]] = px[i[0]] > 0 ? px[i[0]] : 0; });
  }
}

void relu_backward(const float* g, const Leaves& lg, const float* x, const Leaves& lx, float* out,
                   const Leaves& lo) {
  auto plan = make_plan<3>({&lg, &lx, &lo});
  run(plan, [&](const std::array<int64_t, 3>& i) {
    out[i[2]] = x[i[1]] > 0.0f ? g[i[0]] : 0.0f;
  });
}

double sum_f32(const float* x, const Leaves& lx) {
  auto plan = make_plan<1>({&lx});
  double acc = 0.0;
  run(plan, [&](const std::array<int64_t, 1>& i) { acc += x[i[0]]; });
  return acc;
}

int64_t sum_i32(const int32_t* x, const Leaves& lx) {
  auto plan = make_plan<1>({&lx});
  int64_t acc = 0;
  run(plan, [&](const std::array<int64_t, 1>& i) {
    if (__builtin_add_overflow(acc, static_cast<int64_t>(x[i[0]]), &acc))
      throw std::overflow_error("Int32 sum out of range");
  });
  return acc;
}

void sum_into(const float* g, const Leaves& lg, double* acc, const Leaves& lo) {
  auto plan = make_plan<2>({&lg, &lo});
  run(plan, [&](const std::array<int64_t, 2>& i) { acc[i[1]] += g[i[0]]; });
}

void round_to_f32(const double* acc, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]);
}

void broadcast_sum_backward(const float* g, const Leaves& lg, float* out, const Leaves& lo,
                            int64_t out_slots) {
  std::vector<double> acc(static_cast<size_t>(out_slots), 0.0);
  sum_into(g, lg, acc.data(), lo);
  round_to_f32(acc.data(), out, out_slots);
}

}  // namespace sw::kernels

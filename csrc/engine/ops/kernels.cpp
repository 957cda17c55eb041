// Native strided elementwise kernels (see ops/kernels.hpp for the contract).
#include "ops/kernels.hpp"

#include "layout/algebra.hpp"
#include "layout/iter.hpp"
#include "transfer/strided_copy.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace sw::kernels {

namespace {

// Idempotent kernels (each coordinate writes a value determined by its
// index tuple) may skip modes that are stride 0 for every operand; summing
// kernels must visit them.
template <size_t K, class F>
void each(const std::array<const Leaves*, K>& ls, Repeats repeats, F&& f) {
  walk(joint_modes<K>(ls, repeats), f);
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
  each<3>({&la, &lb, &lo}, Repeats::Skip, [&](const Indices<3>& i) { po[i[2]] = op(pa[i[0]], pb[i[1]]); });
}

}  // namespace

int64_t element_count(const Leaves& leaves) { return size_of(leaves); }

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
  copy(dtype, src, ls, dst, compact(ls));
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
  each<2>({&la, &lo}, Repeats::Skip, [&](const Indices<2>& i) {
    out[i[1]] = static_cast<float>(static_cast<double>(a[i[0]]) * s);
  });
}

void mul_scalar_i32(const int32_t* a, const Leaves& la, int64_t s, int32_t* out, const Leaves& lo) {
  each<2>({&la, &lo}, Repeats::Skip, [&](const Indices<2>& i) {
    int64_t r;
    if (__builtin_mul_overflow(static_cast<int64_t>(a[i[0]]), s, &r))
      throw std::overflow_error("Int32 result out of range");
    out[i[1]] = checked_i32(r);
  });
}

void fill(void* out, int64_t n, int itemsize, const void* value) {
  if (n <= 0) return;
  switch (itemsize) {
    case 1: {
      unsigned char v;
      std::memcpy(&v, value, 1);
      std::memset(out, v, static_cast<size_t>(n));
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      if (v == 0) {
        std::memset(out, 0, static_cast<size_t>(n) * 4);
        return;
      }
      uint32_t* p = static_cast<uint32_t*>(out);
      for (int64_t i = 0; i < n; ++i) p[i] = v;  // vectorized
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      uint64_t* p = static_cast<uint64_t*>(out);
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return;
    }
    default:
      throw std::invalid_argument("fill supports items of 1, 4 or 8 bytes");
  }
}

void arange_f32(float* out, int64_t n, double start, double step) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(start + static_cast<double>(i) * step);
}

void arange_i32(int32_t* out, int64_t n, int64_t start, int64_t step) {
  if (step == 1 && start >= INT32_MIN && start + n - 1 <= INT32_MAX) {
    const int32_t s = static_cast<int32_t>(start);
    for (int64_t i = 0; i < n; ++i) out[i] = s + static_cast<int32_t>(i);  // vectorized
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(start + i * step);
}

int64_t arange_count(double start, double stop, double step) {
  if (step == 0.0) throw std::invalid_argument("arange() step must not be zero");
  const double n = std::ceil((stop - start) / step);
  if (!(n > 0)) return 0;  // NaN too
  if (n >= 9.2e18) throw std::overflow_error("arange() has too many elements");
  return static_cast<int64_t>(n);
}

int64_t arange_count(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) throw std::invalid_argument("arange() step must not be zero");
  if (step > 0 ? stop <= start : stop >= start) return 0;
  // |stop - start| may exceed int64 for extreme ends: go through unsigned.
  const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const uint64_t n = (span - 1) / mag + 1;
  if (n > static_cast<uint64_t>(INT64_MAX)) throw std::overflow_error("arange() has too many elements");
  return static_cast<int64_t>(n);
}

void add_scalar_f32(const float* a, const Leaves& la, double s, float* out, const Leaves& lo) {
  each<2>({&la, &lo}, Repeats::Skip, [&](const Indices<2>& i) {
    out[i[1]] = static_cast<float>(static_cast<double>(a[i[0]]) + s);
  });
}

void add_scalar_i32(const int32_t* a, const Leaves& la, int64_t s, int32_t* out, const Leaves& lo) {
  each<2>({&la, &lo}, Repeats::Skip, [&](const Indices<2>& i) {
    int64_t r;
    if (__builtin_add_overflow(static_cast<int64_t>(a[i[0]]), s, &r))
      throw std::overflow_error("Int32 result out of range");
    out[i[1]] = checked_i32(r);
  });
}

void relu(DTypeCode dtype, const void* x, const Leaves& lx, void* out, const Leaves& lo) {
  require_arith(dtype);
  if (dtype == DTypeCode::Float32) {
    const float* px = static_cast<const float*>(x);
    float* po = static_cast<float*>(out);
    each<2>({&lx, &lo}, Repeats::Skip, [&](const Indices<2>& i) {
      const float v = px[i[0]];
      po[i[1]] = (v > 0.0f || std::isnan(v)) ? v : 0.0f;
    });
  } else {
    const int32_t* px = static_cast<const int32_t*>(x);
    int32_t* po = static_cast<int32_t*>(out);
    each<2>({&lx, &lo}, Repeats::Skip, [&](const Indices<2>& i) { po[i[1]] = px[i[0]] > 0 ? px[i[0]] : 0; });
  }
}

void relu_backward(const float* g, const Leaves& lg, const float* x, const Leaves& lx, float* out,
                   const Leaves& lo) {
  each<3>({&lg, &lx, &lo}, Repeats::Skip, [&](const Indices<3>& i) {
    out[i[2]] = x[i[1]] > 0.0f ? g[i[0]] : 0.0f;
  });
}

double sum_f32(const float* x, const Leaves& lx) {
  double acc = 0.0;
  each<1>({&lx}, Repeats::Visit, [&](const Indices<1>& i) { acc += x[i[0]]; });
  return acc;
}

int64_t sum_i32(const int32_t* x, const Leaves& lx) {
  int64_t acc = 0;
  each<1>({&lx}, Repeats::Visit, [&](const Indices<1>& i) {
    if (__builtin_add_overflow(acc, static_cast<int64_t>(x[i[0]]), &acc))
      throw std::overflow_error("Int32 result out of range");
  });
  return acc;
}

void reduce_sum(DTypeCode dtype, const void* x, const Leaves& lx, void* out) {
  require_arith(dtype);
  if (dtype == DTypeCode::Float32)
    *static_cast<float*>(out) = static_cast<float>(sum_f32(static_cast<const float*>(x), lx));
  else
    *static_cast<int32_t*>(out) = checked_i32(sum_i32(static_cast<const int32_t*>(x), lx));
}

void sum_into(const float* g, const Leaves& lg, double* acc, const Leaves& lo) {
  each<2>({&lg, &lo}, Repeats::Visit, [&](const Indices<2>& i) { acc[i[1]] += g[i[0]]; });
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

void mul_broadcast_backward(const float* g, const Leaves& lg, const float* y, const Leaves& ly, float* out,
                            const Leaves& lo, int64_t out_slots) {
  const Leaves dense = compact(lg);
  std::vector<float> products(static_cast<size_t>(size_of(dense)));
  mul(DTypeCode::Float32, g, lg, y, ly, products.data(), dense);
  broadcast_sum_backward(products.data(), dense, out, lo, out_slots);
}

void sum_sources(const std::vector<Source>& sources, float* out, const Leaves& lo, int64_t out_slots) {
  if (sources.empty()) throw std::invalid_argument("sum_sources needs at least one source");
  if (sources.size() == 1) {
    copy(DTypeCode::Float32, sources[0].data, *sources[0].leaves, out, lo);
  } else if (sources.size() == 2) {
    add(DTypeCode::Float32, sources[0].data, *sources[0].leaves, sources[1].data, *sources[1].leaves, out, lo);
  } else {
    std::vector<double> acc(static_cast<size_t>(out_slots), 0.0);
    for (const Source& s : sources) sum_into(s.data, *s.leaves, acc.data(), lo);
    round_to_f32(acc.data(), out, out_slots);
  }
}

}  // namespace sw::kernels

#include "data/convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/pieces.hpp"

namespace sw {

namespace {

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Native sizes of the integer codes ("@" and no prefix) and their standard
// sizes ("=", "<", ">", "!").
int native_int_size(char c) {
  switch (c) {
    case 'b': case 'B': return 1;
    case 'h': case 'H': return static_cast<int>(sizeof(short));
    case 'i': case 'I': return static_cast<int>(sizeof(int));
    case 'l': case 'L': return static_cast<int>(sizeof(long));
    case 'q': case 'Q': return static_cast<int>(sizeof(long long));
    case 'n': case 'N': return static_cast<int>(sizeof(size_t));
    default: return 0;
  }
}
int standard_int_size(char c) {
  switch (c) {
    case 'b': case 'B': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': case 'l': case 'L': return 4;
    case 'q': case 'Q': return 8;
    default: return 0;  // 'n'/'N' exist only in native mode
  }
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);                  // zero, subnormal
  else if (exp == 31) v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

template <class T>
T byteswapped(T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  for (size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
  std::memcpy(&v, b, sizeof(T));
  return v;
}

template <class S, bool Swap>
S load(const char* p) {
  S v;
  std::memcpy(&v, p, sizeof(S));
  if constexpr (Swap) v = byteswapped(v);
  return v;
}

// A double narrowed to binary32 overflows when a finite value becomes an
// infinity (the slot rule: OverflowError, as Int32 has).
inline bool narrowing_overflows(double v, float f) { return std::isinf(f) && !std::isinf(v); }

// dst[j] = (float)src[j] for n native, 8-byte aligned doubles: a loop the
// compiler vectorizes (integer OR of the results' bits, no branch). True
// when some result is an infinity or a NaN, which only then needs a look at
// the source (a finite source that became an infinity overflowed).
bool narrow_doubles(float* __restrict dst, const double* __restrict src, int64_t n) {
  uint32_t special = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float f = static_cast<float>(src[j]);
    dst[j] = f;
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    special |= ((bits & 0x7fffffffu) + 0x00800000u) >> 31;  // exponent all ones
  }
  return special != 0;
}

// One element: false when it cannot be stored (Int32 or Float32 out of range).
template <class D, class S>
bool store(S v, D* out) {
  if constexpr (std::is_same_v<D, float>) {
    if constexpr (std::is_integral_v<S>) {
      *out = static_cast<float>(static_cast<double>(v));  // as a slot write
    } else {
      *out = static_cast<float>(v);
      if constexpr (std::is_same_v<S, double>) return !narrowing_overflows(v, *out);
    }
    return true;
  } else if constexpr (std::is_same_v<D, int32_t>) {
    if constexpr (std::is_signed_v<S> && sizeof(S) > 4) {
      if (v < INT32_MIN || v > INT32_MAX) return false;
    } else if constexpr (!std::is_signed_v<S> && sizeof(S) >= 4) {
      if (v > static_cast<S>(INT32_MAX)) return false;
    }
    *out = static_cast<int32_t>(v);
    return true;
  } else {
    *out = v != 0 ? 1 : 0;  // Bool: one byte, 0 or 1
    return true;
  }
}

// Dimensions merged where both sides step uniformly across them, extent-1
// dimensions dropped; the last dimension is the innermost loop.
struct Dims {
  std::vector<int64_t> extent, src, dst;
};

Dims coalesce(const int64_t* extents, const int64_t* src, const int64_t* dst, int rank) {
  Dims d;
  for (int i = 0; i < rank; ++i) {
    if (extents[i] == 1) continue;
    if (!d.extent.empty() && d.src.back() == src[i] * extents[i] && d.dst.back() == dst[i] * extents[i]) {
      d.extent.back() *= extents[i];
      d.src.back() = src[i];
      d.dst.back() = dst[i];
      continue;
    }
    d.extent.push_back(extents[i]);
    d.src.push_back(src[i]);
    d.dst.push_back(dst[i]);
  }
  if (d.extent.empty()) {  // rank 0 or all extents 1: one element
    d.extent.push_back(1);
    d.src.push_back(0);
    d.dst.push_back(0);
  }
  return d;
}

template <class D, class S, bool Swap, class Load>
ConvertStatus run(D* dst, const char* src, const Dims& d, Load ld) {
  const size_t outer_rank = d.extent.size() - 1;
  const int64_t n = d.extent.back(), ss = d.src.back(), ds = d.dst.back();
  std::vector<int64_t> coord(outer_rank, 0);
  int64_t outer_count = 0;
  const char* s_base = src;
  D* d_base = dst;
  for (;;) {
    if (std::is_same_v<D, S> && !std::is_same_v<D, uint8_t> && !Swap && ss == static_cast<int64_t>(sizeof(S)) && ds == 1) {
      std::memcpy(d_base, s_base, static_cast<size_t>(n) * sizeof(S));
    } else if (std::is_same_v<D, float> && std::is_same_v<S, double> && ss == static_cast<int64_t>(sizeof(S)) &&
               ds == 1) {
      // double -> float, unit strides: one vectorized pass that only notes
      // an overflow; the first offender is looked for afterwards.
      bool special = true;  // the scalar path looks at every element afterwards
      if (!Swap && reinterpret_cast<uintptr_t>(s_base) % alignof(double) == 0) {
        special = narrow_doubles(reinterpret_cast<float*>(d_base), reinterpret_cast<const double*>(s_base), n);
      } else {
        for (int64_t j = 0; j < n; ++j)
          d_base[j] = static_cast<D>(static_cast<float>(ld(s_base + j * static_cast<int64_t>(sizeof(S)))));
      }
      if (special)
        for (int64_t j = 0; j < n; ++j)
          if (narrowing_overflows(static_cast<double>(ld(s_base + j * static_cast<int64_t>(sizeof(S)))),
                                  static_cast<float>(d_base[j])))
            return {ConvertError::Overflow, outer_count * n + j};
    } else if (ss == static_cast<int64_t>(sizeof(S)) && ds == 1) {
      for (int64_t j = 0; j < n; ++j)  // unit strides: vectorizable
        if (!store<D>(ld(s_base + j * static_cast<int64_t>(sizeof(S))), d_base + j))
          return {ConvertError::Overflow, outer_count * n + j};
    } else {
      for (int64_t j = 0; j < n; ++j)
        if (!store<D>(ld(s_base + j * ss), d_base + j * ds)) return {ConvertError::Overflow, outer_count * n + j};
    }
    ++outer_count;
    size_t k = outer_rank;
    for (; k > 0; --k) {
      const size_t i = k - 1;
      s_base += d.src[i];
      d_base += d.dst[i];
      if (++coord[i] < d.extent[i]) break;
      s_base -= d.src[i] * d.extent[i];
      d_base -= d.dst[i] * d.extent[i];
      coord[i] = 0;
    }
    if (k == 0) return {};
  }
}

template <class D, class S>
ConvertStatus run_typed(D* dst, const char* src, const Dims& d, bool swap) {
  if (swap) return run<D, S, true>(dst, src, d, [](const char* p) { return load<S, true>(p); });
  return run<D, S, false>(dst, src, d, [](const char* p) { return load<S, false>(p); });
}

template <class D>
ConvertStatus dispatch(D* dst, const char* src, const Dims& d, ScalarFormat f) {
  switch (f.kind) {
    case ScalarKind::Float:
      if (f.itemsize == 4) return run_typed<D, float>(dst, src, d, f.byteswap);
      if (f.itemsize == 8) return run_typed<D, double>(dst, src, d, f.byteswap);
      if (f.byteswap)
        return run<D, float, true>(dst, src, d, [](const char* p) { return half_to_float(load<uint16_t, true>(p)); });
      return run<D, float, false>(dst, src, d, [](const char* p) { return half_to_float(load<uint16_t, false>(p)); });
    case ScalarKind::Signed:
      switch (f.itemsize) {
        case 1: return run_typed<D, int8_t>(dst, src, d, false);
        case 2: return run_typed<D, int16_t>(dst, src, d, f.byteswap);
        case 4: return run_typed<D, int32_t>(dst, src, d, f.byteswap);
        default: return run_typed<D, int64_t>(dst, src, d, f.byteswap);
      }
    case ScalarKind::Unsigned:
      switch (f.itemsize) {
        case 1: return run_typed<D, uint8_t>(dst, src, d, false);
        case 2: return run_typed<D, uint16_t>(dst, src, d, f.byteswap);
        case 4: return run_typed<D, uint32_t>(dst, src, d, f.byteswap);
        default: return run_typed<D, uint64_t>(dst, src, d, f.byteswap);
      }
    case ScalarKind::Bool:
      return run_typed<D, uint8_t>(dst, src, d, false);
  }
  return {ConvertError::Rejected, 0};
}

}  // namespace

bool parse_buffer_format(std::string_view format, ScalarFormat* out) {
  bool native = true, little = kLittleEndian;
  if (!format.empty()) {
    switch (format.front()) {
      case '@': format.remove_prefix(1); break;
      case '=': native = false; format.remove_prefix(1); break;
      case '<': native = false; little = true; format.remove_prefix(1); break;
      case '>': case '!': native = false; little = false; format.remove_prefix(1); break;
      default: break;
    }
  }
  if (format.size() != 1) return false;
  const char c = format.front();
  ScalarFormat f;
  f.byteswap = little != kLittleEndian;
  switch (c) {
    case '?': f.kind = ScalarKind::Bool; f.itemsize = 1; break;
    case 'e': f.kind = ScalarKind::Float; f.itemsize = 2; break;
    case 'f': f.kind = ScalarKind::Float; f.itemsize = 4; break;
    case 'd': f.kind = ScalarKind::Float; f.itemsize = 8; break;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      f.kind = ScalarKind::Signed;
      f.itemsize = native ? native_int_size(c) : standard_int_size(c);
      break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
      f.kind = ScalarKind::Unsigned;
      f.itemsize = native ? native_int_size(c) : standard_int_size(c);
      break;
    default: return false;
  }
  if (f.itemsize == 0) return false;
  if (f.itemsize == 1) f.byteswap = false;
  *out = f;
  return true;
}

DTypeCode inferred_dtype(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::Bool: return DTypeCode::Bool;
    case ScalarKind::Float: return DTypeCode::Float32;
    default: return DTypeCode::Int32;
  }
}

bool kind_accepted(ScalarKind kind, DTypeCode dst) {
  switch (dst) {
    case DTypeCode::Float32: return kind != ScalarKind::Bool;
    case DTypeCode::Int32: return kind == ScalarKind::Signed || kind == ScalarKind::Unsigned;
    case DTypeCode::Bool: return kind == ScalarKind::Bool;
    default: return false;
  }
}

ConvertStatus convert_strided(void* dst, DTypeCode dst_code, const int64_t* dst_strides, const void* src,
                              ScalarFormat format, const int64_t* src_byte_strides, const int64_t* extents,
                              int rank) {
  if (!kind_accepted(format.kind, dst_code)) return {ConvertError::Rejected, 0};
  const Dims d = coalesce(extents, src_byte_strides, dst_strides, rank);
  const char* s = static_cast<const char*>(src);
  switch (dst_code) {
    case DTypeCode::Float32: return dispatch(static_cast<float*>(dst), s, d, format);
    case DTypeCode::Int32: return dispatch(static_cast<int32_t*>(dst), s, d, format);
    default: return dispatch(static_cast<uint8_t*>(dst), s, d, format);
  }
}

ConvertStatus convert_strided_parallel(void* dst, DTypeCode dst_code, const int64_t* dst_strides, const void* src,
                                       ScalarFormat format, const int64_t* src_byte_strides, const int64_t* extents,
                                       int rank, int ways) {
  int64_t count = 1;
  for (int k = 0; k < rank; ++k) count *= extents[k];
  int d = 0;
  while (d < rank && extents[d] == 1) ++d;
  if (ways <= 0) ways = static_cast<int>(executor_core_threads());
  constexpr int kMaxPieceRank = 64;
  if (count < kParallelConvertElements || d == rank || ways < 2 || rank > kMaxPieceRank ||
      !kind_accepted(format.kind, dst_code))
    return convert_strided(dst, dst_code, dst_strides, src, format, src_byte_strides, extents, rank);
  // Pieces along dimension d (every dimension before it has extent 1, so a
  // piece's row-major ordinals continue from first * inner).
  const int64_t inner = count / extents[d];
  const int64_t min_rows = std::max<int64_t>(1, kParallelConvertElements / 4 / inner);
  const int64_t pieces = std::max<int64_t>(1, std::min<int64_t>(extents[d] / min_rows, int64_t(ways) * 4));
  const int64_t item = itemsize(dst_code);
  std::vector<ConvertStatus> status(static_cast<size_t>(pieces));
  std::vector<std::exception_ptr> failure(static_cast<size_t>(pieces));
  run_pieces(static_cast<size_t>(pieces), [&](size_t p) {
    try {
      const int64_t first = extents[d] * static_cast<int64_t>(p) / pieces;
      const int64_t last = extents[d] * static_cast<int64_t>(p + 1) / pieces;
      int64_t ext[kMaxPieceRank];
      std::copy(extents, extents + rank, ext);
      ext[d] = last - first;
      ConvertStatus st = convert_strided(static_cast<char*>(dst) + first * dst_strides[d] * item, dst_code,
                                         dst_strides, static_cast<const char*>(src) + first * src_byte_strides[d],
                                         format, src_byte_strides, ext, rank);
      if (st.error != ConvertError::None) st.ordinal += first * inner;
      status[p] = st;
    } catch (...) {
      failure[p] = std::current_exception();  // rethrown on the calling thread
    }
  }, ways);
  for (const std::exception_ptr& e : failure)
    if (e) std::rethrow_exception(e);
  for (const ConvertStatus& st : status)  // pieces are in order: the first failure is the earliest element
    if (st.error != ConvertError::None) return st;
  return {};
}

}  // namespace sw

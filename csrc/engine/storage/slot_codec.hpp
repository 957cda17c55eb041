// Slot codecs: one slot value to and from its native bytes (host memory, a
// file, a device buffer), with the conversion rules every native carrier
// shares. Native byte order; Floating and Float64 as an 8-byte double,
// Float32 and Int32 as 4 bytes, Bool as one byte (0 or 1).
//
// Rules: a double or an integer goes into a float slot (Float32 rounds to
// nearest binary32; a finite value beyond its range is OutOfRange, as an
// integer beyond Int32 is, while NaN and the infinities stay as they are; an
// integer goes through double first, as Python's float(int) does); only an
// integer goes into an Int32 slot, and it must fit in 32 bits; only a bool
// goes into a Bool slot.
// Header-only: each carrier's per-slot read and write inline the switch.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <variant>

#include "dtype/dtype.hpp"

namespace sw::codec {

// A slot value as the binding layer hands it over: Python float, int, bool.
using SlotValue = std::variant<double, int64_t, bool>;

// Largest itemsize of a codec dtype: a stack buffer of this many bytes holds
// any one slot.
constexpr int kMaxSlotBytes = 8;

enum class Status {
  Ok,
  WrongType,    // the value's kind does not fit the slot (bool into Int32, ...)
  OutOfRange,   // an integer outside Int32, a finite value beyond Float32
  Unsupported,  // the dtype has no native slot encoding (Any, Integer, ...)
};

// True for the dtypes with a native slot encoding.
constexpr bool has_codec(DTypeCode c) {
  return c == DTypeCode::Floating || c == DTypeCode::Float64 || c == DTypeCode::Float32 ||
         c == DTypeCode::Int32 || c == DTypeCode::Bool;
}

// Bytes of one slot (0 for a dtype without a codec).
constexpr int slot_bytes(DTypeCode c) { return has_codec(c) ? itemsize(c) : 0; }

// Float32 rounding: IEEE round-to-nearest-even. A finite value that rounds
// to an infinity (beyond FLT_MAX by half an ulp or more) is OutOfRange.
inline Status to_float32(double d, float* out) {
  const float f = static_cast<float>(d);
  if (std::isinf(f) && !std::isinf(d)) return Status::OutOfRange;
  *out = f;
  return Status::Ok;
}

// Int32 range check: Ok and *out set, or OutOfRange.
inline Status to_int32(int64_t x, int32_t* out) {
  if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
    return Status::OutOfRange;
  *out = static_cast<int32_t>(x);
  return Status::Ok;
}

// A number as a double for a float slot; WrongType for a bool.
inline Status to_double(const SlotValue& v, double* out) {
  if (const double* d = std::get_if<double>(&v)) {
    *out = *d;
    return Status::Ok;
  }
  if (const int64_t* i = std::get_if<int64_t>(&v)) {
    *out = static_cast<double>(*i);
    return Status::Ok;
  }
  return Status::WrongType;
}

// Encodes v into slot_bytes(code) bytes at out (unaligned is fine). Nothing
// is written unless the result is Ok.
inline Status encode(DTypeCode code, const SlotValue& v, void* out) {
  switch (code) {
    case DTypeCode::Floating:
    case DTypeCode::Float64: {
      double d;
      Status s = to_double(v, &d);
      if (s == Status::Ok) std::memcpy(out, &d, sizeof d);
      return s;
    }
    case DTypeCode::Float32: {
      double d;
      Status s = to_double(v, &d);
      if (s != Status::Ok) return s;
      float f;
      s = to_float32(d, &f);
      if (s == Status::Ok) std::memcpy(out, &f, sizeof f);
      return s;
    }
    case DTypeCode::Int32: {
      const int64_t* i = std::get_if<int64_t>(&v);
      if (!i) return Status::WrongType;
      int32_t x;
      Status s = to_int32(*i, &x);
      if (s == Status::Ok) std::memcpy(out, &x, sizeof x);
      return s;
    }
    case DTypeCode::Bool: {
      const bool* b = std::get_if<bool>(&v);
      if (!b) return Status::WrongType;
      const unsigned char byte = *b ? 1 : 0;
      std::memcpy(out, &byte, 1);
      return Status::Ok;
    }
    default:
      return Status::Unsupported;
  }
}

// Decodes the slot at in. Floats come back as double, Int32 as int64_t, Bool
// as bool (any non-zero byte is true). A dtype without a codec decodes as 0.
inline SlotValue decode(DTypeCode code, const void* in) {
  switch (code) {
    case DTypeCode::Floating:
    case DTypeCode::Float64: {
      double d;
      std::memcpy(&d, in, sizeof d);
      return d;
    }
    case DTypeCode::Float32: {
      float f;
      std::memcpy(&f, in, sizeof f);
      return static_cast<double>(f);
    }
    case DTypeCode::Int32: {
      int32_t x;
      std::memcpy(&x, in, sizeof x);
      return static_cast<int64_t>(x);
    }
    case DTypeCode::Bool: {
      unsigned char byte;
      std::memcpy(&byte, in, 1);
      return byte != 0;
    }
    default:
      return int64_t{0};
  }
}

// The value a slot of code holds after v is written (encode, then decode):
// Float32 rounded, integers in float slots as double. Status as encode.
inline Status canonical(DTypeCode code, const SlotValue& v, SlotValue* out) {
  unsigned char bytes[kMaxSlotBytes];
  Status s = encode(code, v, bytes);
  if (s == Status::Ok) *out = decode(code, bytes);
  return s;
}

}  // namespace sw::codec

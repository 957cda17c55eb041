// Conversion of foreign host data (a Python buffer: any scalar format, any
// byte strides) into a storage dtype, for strideweave.tensor(). The binding
// layer parses the buffer's format string with parse_buffer_format and
// calls convert_strided; the rules match a slot write (see API.md section
// 11): Float32 takes integers and floats (float64 rounds to binary32; a
// finite value beyond its range overflows), Int32 takes integers in range,
// Bool takes only bools.
#pragma once
#include <cstdint>
#include <string_view>

#include "dtype/dtype.hpp"

namespace sw {

enum class ScalarKind : uint8_t { Bool, Signed, Unsigned, Float };

struct ScalarFormat {
  ScalarKind kind = ScalarKind::Float;
  int itemsize = 0;       // bytes: 1, 2, 4 or 8 (Float: 2, 4 or 8)
  bool byteswap = false;  // stored in the non-native byte order
};

// Parses a struct-module format string of one scalar ("f", "<d", "=i",
// "?", "Q", ...). False for anything else (complex "Zf", records, strings,
// object "O", pointers, multi-item formats).
bool parse_buffer_format(std::string_view format, ScalarFormat* out);

// The storage dtype strideweave.tensor() infers for a kind: Float32, Int32
// or Bool.
DTypeCode inferred_dtype(ScalarKind kind);

// Whether a slot of dst accepts values of kind at all (ranges aside).
bool kind_accepted(ScalarKind kind, DTypeCode dst);

enum class ConvertError : uint8_t { None, Rejected, Overflow };
struct ConvertStatus {
  ConvertError error = ConvertError::None;
  int64_t ordinal = -1;  // row-major ordinal of the first offending element
};

// For every coordinate (i0, ..., ik) of extents (row-major order), converts
// the element at src + sum(i * src_byte_strides) and stores it at slot
// sum(i * dst_strides) of dst (a host array of dst's itemsize). dst is
// Float32, Int32 or Bool. rank 0 converts one element. Stops at the first
// element that cannot be stored (Int32 out of range, a finite float64
// beyond Float32's range) and reports it;
// Rejected when kind_accepted is false (nothing is written).
ConvertStatus convert_strided(void* dst, DTypeCode dst_code, const int64_t* dst_strides, const void* src,
                              ScalarFormat format, const int64_t* src_byte_strides, const int64_t* extents,
                              int rank);

// Conversions of at least this many elements are cut into pieces that run
// on several threads.
inline constexpr int64_t kParallelConvertElements = int64_t(1) << 18;
// convert_strided on this thread and up to ways - 1 piece helpers (<= 0:
// the pool's core thread count): the outermost dimension longer than 1 is
// cut into pieces of about kParallelConvertElements / 4 elements or more.
// The same result and status as convert_strided (the first offending element
// of the whole data, in row-major order); smaller data runs on this thread.
ConvertStatus convert_strided_parallel(void* dst, DTypeCode dst_code, const int64_t* dst_strides, const void* src,
                                       ScalarFormat format, const int64_t* src_byte_strides, const int64_t* extents,
                                       int rank, int ways = 0);

}  // namespace sw

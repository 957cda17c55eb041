// Storage and logical dtype codes shared by the engine and the binding layer.
#pragma once
#include <cstdint>

namespace sw {

enum class DTypeCode : uint8_t {
  Any,
  Floating,
  Integer,
  Float32,
  Float64,
  Int32,
  Bool,
  Compound,
};

// Bytes one slot of this dtype occupies in native storage (host memory or a
// file). Floating is stored as an 8-byte double in files; 0 means "not a
// native storage dtype".
constexpr int itemsize(DTypeCode c) {
  switch (c) {
    case DTypeCode::Float32: return 4;
    case DTypeCode::Int32: return 4;
    case DTypeCode::Bool: return 1;
    case DTypeCode::Float64: return 8;
    case DTypeCode::Floating: return 8;
    default: return 0;
  }
}

}  // namespace sw

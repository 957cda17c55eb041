#include "carriers/kinds.hpp"

#include <cstdint>
#include <new>
#include <stdexcept>

#include "storage/aligned_buffer.hpp"

namespace sw {

namespace {

constexpr DTypeCode kDefinitionCodes[kDefinitionStorageCount] = {
    DTypeCode::Any, DTypeCode::Floating, DTypeCode::Float32, DTypeCode::Float64, DTypeCode::Int32, DTypeCode::Bool};

}  // namespace

const char* carrier_kind_name(CarrierKind k) {
  switch (k) {
    case CarrierKind::CPU: return "CPU";
    case CarrierKind::Generic: return "Generic";
    case CarrierKind::FileBacked: return "FileBacked";
    case CarrierKind::Metal: return "Metal";
  }
  return "Carrier";
}

bool supports_dtype(CarrierKind k, DTypeCode c) {
  switch (k) {
    // Native host and device memory: the compact dtypes.
    case CarrierKind::CPU:
    case CarrierKind::Metal:
      return c == DTypeCode::Float32 || c == DTypeCode::Int32 || c == DTypeCode::Bool;
    case CarrierKind::Generic:
      return c == DTypeCode::Any || c == DTypeCode::Floating || c == DTypeCode::Float32 || c == DTypeCode::Int32 ||
             c == DTypeCode::Bool;
    // Files hold numbers only (Floating as an 8-byte double).
    case CarrierKind::FileBacked:
      return c == DTypeCode::Floating || c == DTypeCode::Float32 || c == DTypeCode::Int32;
  }
  return false;
}

const char* supported_dtypes_hint(CarrierKind k) {
  switch (k) {
    case CarrierKind::CPU:
    case CarrierKind::Metal:
      return "use DType.Float32, DType.Int32 or DType.Bool";
    case CarrierKind::Generic:
      return "use DType.Any, Floating, Float32, Int32 or Bool";
    case CarrierKind::FileBacked:
      return "use DType.Floating, DType.Float32 or DType.Int32";
  }
  return "";
}

int definition_storage_index(DTypeCode c) {
  for (int i = 0; i < kDefinitionStorageCount; ++i)
    if (kDefinitionCodes[i] == c) return i;
  return -1;
}

DTypeCode definition_storage_code(int index) { return kDefinitionCodes[index]; }

size_t host_storage_bytes(int64_t n, DTypeCode dtype) {
  if (n < 0) throw std::invalid_argument("CPU size must be non-negative");
  const size_t item = static_cast<size_t>(itemsize(dtype));
  if (item == 0) throw std::invalid_argument("CPU storage needs a native dtype");
  // The allocation rounds up to whole alignment units.
  if (static_cast<uint64_t>(n) > (SIZE_MAX - kStorageAlignment) / item) throw std::bad_alloc();
  return static_cast<size_t>(n) * item;
}

}  // namespace sw

// Storage rules of the built-in carrier kinds: which dtypes each stores (and
// the hint its ValueError gives), the storage dtypes of definition-backed
// carriers, how many bytes host storage of n slots takes, and the slot-index
// rule every carrier shares.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dtype/dtype.hpp"

namespace sw {

enum class CarrierKind : uint8_t { CPU, Generic, FileBacked, Metal };

// The class name messages use ("CPU", "FileBacked", ...).
const char* carrier_kind_name(CarrierKind k);
// Whether a carrier of kind k stores slots of dtype c.
bool supports_dtype(CarrierKind k, DTypeCode c);
// The fix a refused dtype's message suggests ("use DType.Float32, ...").
const char* supported_dtypes_hint(CarrierKind k);

// Definition-backed carriers get one vtable per storage dtype (so the dtype
// needs no per-instance field): the index of c's vtable, or -1 when c cannot
// be a storage dtype; and back (index in [0, kDefinitionStorageCount)).
constexpr int kDefinitionStorageCount = 6;
int definition_storage_index(DTypeCode c);
DTypeCode definition_storage_code(int index);

// Bytes of CPU host storage for n slots of dtype (a native storage dtype).
// Throws std::invalid_argument("CPU size must be non-negative") and
// std::bad_alloc when the aligned allocation could not be sized.
size_t host_storage_bytes(int64_t n, DTypeCode dtype);

// A slot index is a storage offset: negative indices are not wrapped.
constexpr bool slot_in_range(int64_t i, int64_t n) { return i >= 0 && i < n; }

}  // namespace sw

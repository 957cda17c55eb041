// DLPack managed-tensor construction (engine side, no Python).
//
// A managed tensor is one malloc'd block holding the DLPack struct, its
// manager context and the shape and stride arrays; its deleter frees that block
// with plain free(), drops the export reference on the storage range (if any,
// see AlignedBuffer::acquire_export_ref) and then hands the opaque owner to a
// release callback. The binding layer supplies the owner (a strong reference
// to the exporting Tensor) and a callback that may be run without the GIL.
#pragma once
#include <cstdint>
#include <span>

#include <dlpack/dlpack.h>
#include "dtype/dtype.hpp"
#include "layout/layout.hpp"
#include "storage/aligned_buffer.hpp"
#include "tensor/subtensor_rules.hpp"

namespace sw::dlpack {

// Called exactly once by the deleter with the owner given at construction,
// after the block is freed. Must be safe on any thread, with or without the
// GIL (the deleter may run from a consumer's thread or at interpreter exit).
using OwnerRelease = void (*)(void* owner) noexcept;

// The manager_ctx of every managed tensor built here.
struct ExportContext {
  void* owner;
  OwnerRelease release_owner;  // may be null: nothing to release
  StorageControl* storage;     // export reference on the range, or null
  int64_t* shape;              // ndim entries (non-null even for ndim 0)
  int64_t* strides;            // ndim entries, in elements
  int32_t ndim;
};

// Everything a managed tensor describes besides its owner.
struct ExportSpec {
  void* data = nullptr;
  DLDevice device{kDLCPU, 0};
  DLDataType dtype{kDLFloat, 32, 1};
  uint64_t byte_offset = 0;
  std::span<const LeafMode> leaves;  // shape/strides in order, copied verbatim
  bool read_only = false;        // versioned only: sets the READ_ONLY flag
  // Export reference pinning the range data addresses (null: none, e.g. a
  // Python carrier's foreign pointer). Owned by the managed tensor once
  // make_* succeeds; on failure it stays the caller's to drop.
  StorageControl* storage = nullptr;
};

// DLPack dtype for an exportable logical dtype (Float32, Int32); false for
// every other dtype. Inline: it runs on every export.
inline bool dl_dtype_for(DTypeCode code, DLDataType* out) noexcept {
  switch (code) {
    case DTypeCode::Float32: *out = DLDataType{kDLFloat, 32, 1}; return true;
    case DTypeCode::Int32: *out = DLDataType{kDLInt, 32, 1}; return true;
    default: return false;
  }
}

// Build a managed tensor; nullptr when the allocation fails (nothing to free,
// owner and spec.storage untouched). On success the returned tensor's deleter
// frees it, drops spec.storage and calls release_owner(owner), each exactly
// once.
DLManagedTensor* make_legacy(const ExportSpec& spec, void* owner, OwnerRelease release_owner) noexcept;
// Versioned form: version exactly 1.0, flags READ_ONLY iff spec.read_only.
DLManagedTensorVersioned* make_versioned(const ExportSpec& spec, void* owner,
                                         OwnerRelease release_owner) noexcept;

// The deleters installed by make_legacy / make_versioned (exposed so tests
// and callers can recognise them).
extern "C" void sw_dlpack_legacy_deleter(DLManagedTensor* self);
extern "C" void sw_dlpack_versioned_deleter(DLManagedTensorVersioned* self);

// ------------------------------------------------------- export decisions
//
// The rules of __dlpack__ (API.md section 7) over plain values; the binding
// runs the Python side (hooks, argument parsing) in API.md's check order and
// maps each refusal to its exception.

// A two-integer argument (dl_device, max_version) as the binding parsed it:
// each component's value, or its overflow direction (+1 above, -1 below the
// long long range, 0 when value holds it).
struct IntPair {
  long long value[2] = {0, 0};
  int overflow[2] = {0, 0};
};

// max_version: any major >= 1 reads 1.0 (versioned); a negative component
// is refused.
enum class VersionChoice : uint8_t { Legacy, Versioned, Negative };
inline VersionChoice choose_version(const IntPair& v) noexcept {
  for (int k = 0; k < 2; ++k)
    if (v.overflow[k] < 0 || (!v.overflow[k] && v.value[k] < 0)) return VersionChoice::Negative;
  return v.overflow[0] > 0 || v.value[0] >= 1 ? VersionChoice::Versioned : VersionChoice::Legacy;
}

// dl_device: the requested (type, id) must be the storage's own device
// (StrideWeave makes no cross-device copies).
bool device_matches(const IntPair& want, DLDevice have) noexcept;

// The dlpack_info() fields: a device field fits int32, the pointer a uintptr_t.
bool fits_int32(long long v) noexcept;
bool fits_pointer(unsigned long long v) noexcept;

// A tensor with elements has no storage to export: a null pointer, or a
// carrier released after its pointer was read (released_now, unless it was
// released already when the export began).
inline bool storage_gone(int64_t size, uintptr_t pointer, bool released_before, bool released_now) noexcept {
  if (size == 0) return false;
  return pointer == 0 || (!released_before && released_now);
}

// What a carrier that refuses to export can do instead: the dtype argument
// of the suggested strideweave.CPU(...) move ("" for Float32), or nullptr
// when CPU storage cannot hold the dtype (copy the values out instead).
const char* cpu_move_dtype_arg(DTypeCode code) noexcept;

// A CPU carrier exports its native storage as it is, never as Python hooks
// describe it (API.md section 12).
struct CpuStorageView {
  DTypeCode dtype = DTypeCode::Any;
  const void* data = nullptr;  // null once released
  int64_t size = 0;            // slots
};
enum class CpuExport : uint8_t {
  Pin,              // exportable: pin the range with an export reference
  NothingToPin,     // no elements: exportable without a reference
  DtypeMismatch,    // the tensor's dtype is not the storage's
  NoData,           // released storage
  PointerMismatch,  // dlpack_info()['pointer'] is not the storage
  SpanExceeds,      // offset + cosize past the storage's slots
};
// Inline: it runs on every export of a CPU tensor (benchmarked against NumPy).
inline CpuExport check_cpu_export(DTypeCode tensor_dtype, const CpuStorageView& storage, uintptr_t pointer,
                                  int64_t offset, const Layout& layout) noexcept {
  if (tensor_dtype != storage.dtype) return CpuExport::DtypeMismatch;
  if (layout.size() == 0) return CpuExport::NothingToPin;
  if (!storage.data) return CpuExport::NoData;
  if (pointer != reinterpret_cast<uintptr_t>(storage.data)) return CpuExport::PointerMismatch;
  if (!span_fits(offset, storage.size, layout.cosize())) return CpuExport::SpanExceeds;
  return CpuExport::Pin;
}

// Byte offset of a tensor's first slot in its exported storage.
inline uint64_t byte_offset(int64_t offset, DTypeCode code) noexcept {
  return static_cast<uint64_t>(offset) * static_cast<uint64_t>(itemsize(code));
}

// One malloc'd block holding a layout's DLPack shape then strides (2 * ndim
// entries; free with std::free), for borrowed DLTensors; nullptr when the
// allocation fails or there are no leaves.
int64_t* dims_block(std::span<const LeafMode> leaves) noexcept;
// The borrowed DLTensor of spec over dims (a dims_block of spec.leaves, or
// any valid pointer for ndim 0).
void fill_dltensor(const ExportSpec& spec, const int64_t* dims, DLTensor* out) noexcept;

}  // namespace sw::dlpack

// DLPack managed-tensor construction (engine side, no Python).
//
// A managed tensor is one malloc'd block holding the DLPack struct, its
// manager context and the shape and stride arrays; its deleter frees that block
// with plain free() and then hands the opaque owner to a release callback. The
// binding layer supplies the owner (a strong reference to the exporting
// Tensor) and a callback that may be run without the GIL.
#pragma once
#include <cstdint>
#include <span>

#include <dlpack/dlpack.h>
#include "dtype.hpp"
#include "layout.hpp"

namespace sw::dlpack {

// Called exactly once by the deleter with the owner given at construction,
// after the block is freed. Must be safe on any thread, with or without the
// GIL (the deleter may run from a consumer's thread or at interpreter exit).
using OwnerRelease = void (*)(void* owner) noexcept;

// The manager_ctx of every managed tensor built here.
struct ExportContext {
  void* owner;
  OwnerRelease release_owner;  // may be null: nothing to release
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
};

// DLPack dtype for an exportable logical dtype (Float32, Int32); false for
// every other dtype.
bool dl_dtype_for(DTypeCode code, DLDataType* out) noexcept;

// Build a managed tensor; nullptr when the allocation fails (nothing to free,
// owner untouched). On success the returned tensor's deleter frees it and
// calls release_owner(owner) exactly once.
DLManagedTensor* make_legacy(const ExportSpec& spec, void* owner, OwnerRelease release_owner) noexcept;
// Versioned form: version exactly 1.0, flags READ_ONLY iff spec.read_only.
DLManagedTensorVersioned* make_versioned(const ExportSpec& spec, void* owner,
                                         OwnerRelease release_owner) noexcept;

// The deleters installed by make_legacy / make_versioned (exposed so tests
// and callers can recognise them).
extern "C" void sw_dlpack_legacy_deleter(DLManagedTensor* self);
extern "C" void sw_dlpack_versioned_deleter(DLManagedTensorVersioned* self);

}  // namespace sw::dlpack

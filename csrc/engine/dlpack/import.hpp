// DLPack import (engine side, no Python): what a producer's DLTensor
// describes, whether a CPU carrier can view it in place, the copy that
// resolves what it cannot, and the managed tensor the consumer owns until
// its deleter has run, exactly once.
//
// The binding (csrc/python/dlpack_import.cpp) obtains the managed tensor
// (capsule, C exchange API), maps each ImportCheck to its exception and
// hands the deleter to the adopting CPU storage (AlignedBuffer::adopt), whose
// export/retire machinery decides when the producer gets its memory back.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>
#include "dtype/dtype.hpp"
#include "layout/layout.hpp"
#include "storage/aligned_buffer.hpp"

namespace sw::dlpack {

// A producer's managed tensor (legacy or versioned) owned by the consumer:
// its deleter runs exactly once, when this object is reset or destroyed, or,
// after hand_over(), when the storage that took the ForeignRelease gives the
// memory back. Move-only. A null deleter means there is nothing to run.
class ImportedTensor {
 public:
  ImportedTensor() = default;
  static ImportedTensor legacy(DLManagedTensor* m) noexcept { return ImportedTensor(m, false); }
  static ImportedTensor versioned(DLManagedTensorVersioned* m) noexcept { return ImportedTensor(m, true); }
  ImportedTensor(const ImportedTensor&) = delete;
  ImportedTensor& operator=(const ImportedTensor&) = delete;
  ImportedTensor(ImportedTensor&& o) noexcept : m_(o.m_), versioned_(o.versioned_) { o.m_ = nullptr; }
  ImportedTensor& operator=(ImportedTensor&& o) noexcept {
    if (this != &o) {
      reset();
      m_ = o.m_;
      versioned_ = o.versioned_;
      o.m_ = nullptr;
    }
    return *this;
  }
  ~ImportedTensor() { reset(); }

  explicit operator bool() const { return m_ != nullptr; }
  bool is_versioned() const { return versioned_; }
  const DLTensor& tensor() const {
    return versioned_ ? static_cast<const DLManagedTensorVersioned*>(m_)->dl_tensor
                      : static_cast<const DLManagedTensor*>(m_)->dl_tensor;
  }
  // The versioned READ_ONLY flag; a legacy tensor carries no flags word.
  bool read_only() const {
    return versioned_ && (static_cast<const DLManagedTensorVersioned*>(m_)->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  }
  // The versioned IS_COPIED flag: the producer made this copy for us alone.
  bool is_copied() const {
    return versioned_ && (static_cast<const DLManagedTensorVersioned*>(m_)->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  }
  // Runs the deleter now (no-op when empty).
  void reset() noexcept;
  // The deleter call as a ForeignRelease (for AlignedBuffer::adopt); this
  // object is empty afterwards and will not run it.
  ForeignRelease hand_over() noexcept;

 private:
  ImportedTensor(void* m, bool versioned) : m_(m), versioned_(versioned) {}
  void* m_ = nullptr;
  bool versioned_ = false;
};

// Device types whose memory the host addresses directly: CPU, CUDA host
// (pinned) and ROCm host memory.
bool is_host_device(int32_t device_type) noexcept;

// The CPU storage dtype for a DLPack dtype: float32 -> Float32, int32 ->
// Int32, bool (8 bits) -> Bool, one lane each; false for every other dtype.
bool storage_dtype_for(DLDataType t, DTypeCode* out) noexcept;
// NumPy-style name of a DLPack dtype for messages: "float64", "uint8",
// "bfloat16", "complex64", "bool", "float32x4" (lanes), "code 9, 8 bits".
std::string dtype_text(DLDataType t);
// The NumPy dtype a conversion of t should target (for messages): "int32"
// for integer codes, "bool" for bool, else "float32".
const char* conversion_target(DLDataType t) noexcept;

// What inspect_import found, in the order the checks run.
enum class ImportCheck : uint8_t {
  View,            // a CPU carrier can view it in place
  NotHost,         // copy resolves: the memory is on another device
  NegativeStride,  // copy resolves: a mode of extent > 1 has a negative stride
  Misaligned,      // copy resolves: the first element is not item-aligned
  Dtype,           // never resolvable: the dtype is not float32/int32/bool
  Malformed,       // never resolvable: see ImportView::malformed
  TooLarge,        // never resolvable: the size or span overflows
};

// A producer's DLTensor as StrideWeave reads it. shape and strides point
// into the producer's structure (valid while its managed tensor is held).
struct ImportView {
  ImportCheck check = ImportCheck::Malformed;
  DTypeCode dtype = DTypeCode::Any;
  int32_t ndim = 0;
  const int64_t* shape = nullptr;
  const int64_t* strides = nullptr;  // null: compact row-major
  int64_t size = 0;                  // elements (0 when an extent is 0)
  int64_t span = 0;                  // slots from the first element to the last it reaches; 0 when size is 0
  unsigned char* first = nullptr;    // data + byte_offset (what slot 0 of a view is)
  const char* malformed = nullptr;   // why, for ImportCheck::Malformed

  // Element stride of mode i (the given one, or row-major).
  int64_t stride(int32_t i) const noexcept { return strides ? strides[i] : row_major_stride(i); }
  // Leaf mode i of the view's Layout (see import_leaves).
  LeafMode leaf(int32_t i) const noexcept {
    const int64_t s = stride(i);
    return LeafMode{shape[i], (shape[i] <= 1 || size == 0) && s < 0 ? 0 : s};
  }
  int64_t row_major_stride(int32_t i) const noexcept;
};

// Reads and checks t. Only shape and strides are read (host arrays, as
// DLPack requires), never the data.
ImportView inspect_import(const DLTensor& t) noexcept;

// The leaf modes of a view's Layout, mode i being dimension i with its
// extent and element stride; a negative stride on a mode of extent <= 1, or
// of a view without elements (where no coordinate moves along it), reads
// as 0. Precondition: check is View
// (or a copy's row-major strides are wanted: see row_major_leaves).
void import_leaves(const ImportView& v, std::vector<LeafMode>* out);
// The compact row-major leaves of the view's shape (what a copy gets, as
// strideweave.tensor() lays data out).
void row_major_leaves(const ImportView& v, std::vector<LeafMode>* out);
// A flat Layout over leaves (one top-level mode per leaf; rank 0 for none).
// Throws std::invalid_argument for a stride < 0.
Layout flat_layout(const std::vector<LeafMode>& leaves);

// Copies the view's elements, in row-major order of its shape, into dst (a
// host buffer of v.size items of v.dtype). Any strides (negative included)
// and any alignment. Precondition: the view is host memory of a supported
// dtype (check is View, NegativeStride or Misaligned). Throws
// std::bad_alloc only for a rank above 32 when its stride arrays cannot be
// allocated.
void copy_row_major(const ImportView& v, void* dst);

}  // namespace sw::dlpack

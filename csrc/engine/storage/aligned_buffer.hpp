// Host storage: one 64-byte aligned allocation (or an adopted foreign range)
// and the export references that keep its address range alive.
#pragma once
#include <cstddef>

namespace sw {

constexpr size_t kStorageAlignment = 64;

// Shared lifetime of one allocation's address range: one reference for the
// owning AlignedBuffer plus one per outstanding export (a DLPack managed
// tensor). Opaque; only drop_export_ref touches it from outside.
struct StorageControl;

// How an adopted foreign range is given back (a DLPack producer's deleter,
// strideweave.from_dlpack): release(ctx) runs exactly once, when the range is
// finally given up. It may run on any thread, with or without the GIL, so it
// must be what the producer's own deleter is: callable from anywhere. A null
// release gives nothing back.
struct ForeignRelease {
  void (*release)(void* ctx) noexcept = nullptr;
  void* ctx = nullptr;
};

// Drops one export reference taken by AlignedBuffer::acquire_export_ref.
// Thread-safe and lock-free up to the final free: it touches only the atomic
// count and, for the last reference of a released buffer, unmaps or frees the
// range (or, for an adopted range, calls its ForeignRelease). No Python, no
// locks: safe on any thread, with or without the GIL, after interpreter
// finalization began. Null is a no-op.
void drop_export_ref(StorageControl* ctl) noexcept;

// One aligned allocation, movable, freed by release() or the destructor.
//
// Exports: acquire_export_ref() pins the address range for a consumer that
// addresses it directly. release() with exports outstanding "retires" the
// range instead of freeing it: it reads as zeros from then on (from
// kReturnPagesBytes up its whole pages are dropped, MADV_DONTNEED, so their
// physical memory is returned at once and zero pages come back on the next
// touch; smaller buffers, and the partial pages at either end of a heap
// buffer, are zeroed in place), writes land in memory nobody else owns, and
// the range is unmapped/freed by the last drop_export_ref. The buffer itself is empty after release() either way.
//
// Adopted ranges (adopt()): memory another library owns, viewed in place.
// It is never zeroed, reused or freed here: release() with no export
// outstanding calls its ForeignRelease at once; with exports outstanding the
// range stays as the producer has it (it cannot be remapped to zeros: other
// views of the producer still read it) and the last drop_export_ref calls
// the ForeignRelease instead of freeing.
// Methods of one AlignedBuffer are not synchronised with each other (the
// owner serialises them); drop_export_ref may race with all of them.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(o.data_),
        bytes_(o.bytes_),
        mapped_(o.mapped_),
        padded_(o.padded_),
        ctl_(o.ctl_),
        foreign_(o.foreign_),
        adopted_(o.adopted_) {
    o.forget();
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  ~AlignedBuffer() { release(); }

  // Allocates bytes (at least one alignment unit, so even an empty buffer
  // has a non-null aligned pointer); zero-fills when zero is true. Throws
  // std::bad_alloc.
  void allocate(size_t bytes, bool zero);
  // Views bytes at data (any alignment; null only with bytes == 0), which
  // another owner holds until release.release(release.ctx) (exactly once,
  // see above). Releases what the buffer held before. Never throws.
  void adopt(void* data, size_t bytes, ForeignRelease release) noexcept;
  // Frees the storage, or retires it while exports are outstanding (above);
  // an adopted range is given back (at once, or by the last export).
  void release();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // True when the storage is an anonymous mapping (see kMappedThreshold).
  bool is_mapped() const { return mapped_ != 0; }
  // True while the buffer views an adopted foreign range.
  bool is_adopted() const { return adopted_; }

  // One reference on the current range for an export; hand it to
  // drop_export_ref exactly once. Null when the buffer holds no storage or
  // the control block cannot be allocated (the caller refuses the export).
  StorageControl* acquire_export_ref() noexcept;
  // Export references currently outstanding on this buffer's range (tests,
  // diagnostics; racy by nature when exports die on other threads).
  size_t export_refs() const noexcept;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  // Length of the anonymous mapping for large buffers (0: heap allocation).
  size_t mapped_ = 0;
  // Allocated length (whole alignment units, or the mapping length).
  size_t padded_ = 0;
  // Created by the first export; null while the range was never exported.
  StorageControl* ctl_ = nullptr;
  // The adopted range's owner (adopted_ true); unused otherwise.
  ForeignRelease foreign_{};
  bool adopted_ = false;
  // Empties the members without freeing anything (moved-from state).
  void forget() noexcept;
};

// Buffers of at least this many bytes are anonymous mappings: the kernel
// hands out zeroed pages lazily (no memset), transparent huge pages are
// requested, and release() gives the memory back at once. Smaller ones come
// from the heap, where a buffer freed by one move is reused by the next
// allocation of its size without faulting fresh pages in (glibc keeps
// chunks below 32 MiB on its heap once one was freed, which is what NumPy's
// fresh arrays get: the same bound here); heap buffers from
// kHugeAdviceBytes up are advised huge pages, as NumPy advises its own.
constexpr size_t kMappedThreshold = size_t(32) << 20;
// Retired buffers (released with exports outstanding) of at least this many
// bytes return their physical memory at once, heap buffers included; below
// it the memset costs less than the system call and what it would return.
constexpr size_t kReturnPagesBytes = size_t(1) << 20;
constexpr size_t kHugeAdviceBytes = size_t(4) << 20;

}  // namespace sw

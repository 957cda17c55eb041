// Native storage: 64-byte aligned host buffers and file-backed slot storage.
#pragma once
#include <sys/uio.h>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sw {

constexpr size_t kStorageAlignment = 64;

// Shared lifetime of one allocation's address range: one reference for the
// owning AlignedBuffer plus one per outstanding export (a DLPack managed
// tensor). Opaque; only drop_export_ref touches it from outside.
struct StorageControl;

// Drops one export reference taken by AlignedBuffer::acquire_export_ref.
// Thread-safe and lock-free up to the final free: it touches only the atomic
// count and, for the last reference of a released buffer, unmaps or frees the
// range. No Python, no locks: safe on any thread, with or without the GIL,
// after interpreter finalization began. Null is a no-op.
void drop_export_ref(StorageControl* ctl) noexcept;

// One aligned allocation, movable, freed by release() or the destructor.
//
// Exports: acquire_export_ref() pins the address range for a consumer that
// addresses it directly. release() with exports outstanding "retires" the
// range instead of freeing it: it reads as zeros from then on (large mapped
// buffers get fresh zero pages mapped over them, so their physical memory is
// returned at once; heap buffers are zeroed and kept), writes land in memory
// nobody else owns, and the range is unmapped/freed by the last
// drop_export_ref. The buffer itself is empty after release() either way.
// Methods of one AlignedBuffer are not synchronised with each other (the
// owner serialises them); drop_export_ref may race with all of them.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(o.data_), bytes_(o.bytes_), mapped_(o.mapped_), padded_(o.padded_), ctl_(o.ctl_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
    o.mapped_ = 0;
    o.padded_ = 0;
    o.ctl_ = nullptr;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  ~AlignedBuffer() { release(); }

  // Allocates bytes (at least one alignment unit, so even an empty buffer
  // has a non-null aligned pointer); zero-fills when zero is true. Throws
  // std::bad_alloc.
  void allocate(size_t bytes, bool zero);
  // Frees the storage, or retires it while exports are outstanding (above).
  void release();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // True when the storage is an anonymous mapping (see kMappedThreshold).
  bool is_mapped() const { return mapped_ != 0; }

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
constexpr size_t kHugeAdviceBytes = size_t(4) << 20;
// Heap buffers of kReuseMinBytes up that their owner frees with no export
// outstanding are kept for the next allocation of the same size
// (storage.cpp, ReuseCache): those up to kReuseCacheBytes in size up to
// kReuseCacheBytes in all, larger ones (below kMappedThreshold: a tiled
// projection's 16 MiB result, say) up to kReuseLargeBytes in all. At most
// kReuseCacheBytes + kReuseLargeBytes of freed memory stay resident.
constexpr size_t kReuseMinBytes = size_t(128) << 10;
constexpr size_t kReuseCacheBytes = size_t(8) << 20;
constexpr size_t kReuseLargeBytes = size_t(32) << 20;

// A removed file of at least this many bytes is closed on the background
// closer (fd_closer.hpp, see FileStorage::close_and_unlink); smaller ones on
// the calling thread. Measured on ext4 (2 shared cores): from 64 KiB the
// deferred close takes a fifth to a third off a File->CPU move; at 4 KiB it
// saves nothing.
constexpr int64_t kDeferredCloseBytes = int64_t(64) << 10;

// Slots in a binary file. Throws std::system_error on I/O failure.
class FileStorage {
 public:
  FileStorage() = default;
  FileStorage(const FileStorage&) = delete;
  FileStorage& operator=(const FileStorage&) = delete;
  ~FileStorage() { close_and_unlink(); }

  // Creates the file exclusively (O_EXCL); throws std::system_error with
  // EEXIST when it exists.
  void create(const std::string& path);
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }
  // Grows (or shrinks) the file to bytes, zero-filled.
  void resize(int64_t bytes);
  void read(int64_t offset, void* dst, int64_t n) const;
  void write(int64_t offset, const void* src, int64_t n);
  // The n pieces in order over the contiguous file range from offset, as
  // preadv / pwritev calls (a partial one continues where it stopped).
  void read_pieces(int64_t offset, const ::iovec* iov, int n) const;
  void write_pieces(int64_t offset, const ::iovec* iov, int n);
  // Removes the file and closes the descriptor (from kDeferredCloseBytes up
  // the descriptor is closed on the background closer just after); the file
  // is gone when this returns. Idempotent.
  void close_and_unlink();
  // Closes the descriptor but leaves the file (a forked child's copy of its
  // parent's storage); idempotent.
  void close_keep_file();

 private:
  int fd_ = -1;
  std::string path_;
  int64_t bytes_ = 0;
};

}  // namespace sw

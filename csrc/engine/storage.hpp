// Native storage: 64-byte aligned host buffers and file-backed slot storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace sw {

constexpr size_t kStorageAlignment = 64;

// One aligned allocation, movable, freed by release() or the destructor.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_), mapped_(o.mapped_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
    o.mapped_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  ~AlignedBuffer() { release(); }

  // Allocates bytes (at least one alignment unit, so even an empty buffer
  // has a non-null aligned pointer); zero-fills when zero is true. Throws
  // std::bad_alloc.
  void allocate(size_t bytes, bool zero);
  void release();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  // Length of the anonymous mapping for large buffers (0: heap allocation).
  size_t mapped_ = 0;
};

// Buffers of at least this many bytes are anonymous mappings: the kernel
// hands out zeroed pages lazily (no memset), and transparent huge pages are
// requested, which cuts page-fault and unmap cost for the large spans moves
// and exports deal in (NumPy does the same above 4 MiB).
constexpr size_t kMappedThreshold = size_t(4) << 20;

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
  // Closes the descriptor and removes the file; idempotent.
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

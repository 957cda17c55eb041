// Native storage: 64-byte aligned host buffers and file-backed slot storage.
#include "storage.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

namespace sw {

namespace {

// Heap buffers come from plain malloc, over-allocated by one alignment unit
// and aligned up; the byte before the aligned address keeps the distance
// back (1..64). Plain malloc chunks are reused exactly when a buffer of the
// same size is freed and allocated again (a move frees its source and the
// next one allocates its destination), where memalign's split chunks were
// not: every move then faulted in fresh heap pages.
void* heap_aligned(size_t bytes) {
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + kStorageAlignment));
  if (!raw) throw std::bad_alloc();
  const uintptr_t a = (reinterpret_cast<uintptr_t>(raw) + kStorageAlignment) & ~uintptr_t(kStorageAlignment - 1);
  auto* p = reinterpret_cast<unsigned char*>(a);
  p[-1] = static_cast<unsigned char>(p - raw);
  return p;
}

void heap_free(void* data) {
  auto* p = static_cast<unsigned char*>(data);
  std::free(p - p[-1]);
}

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}
}  // namespace

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    mapped_ = o.mapped_;
    o.data_ = nullptr;
    o.bytes_ = 0;
    o.mapped_ = 0;
  }
  return *this;
}

void AlignedBuffer::allocate(size_t bytes, bool zero) {
  release();
  // Round up to whole alignment units (at least one) so the pointer is never
  // null and the tail of the last unit is ours too.
  if (bytes > SIZE_MAX - kStorageAlignment) throw std::bad_alloc();
  size_t padded = bytes == 0 ? kStorageAlignment
                             : (bytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan every buffer stays on the instrumented heap so overflows of
  // large buffers are reported too.
  constexpr bool kUseMappings = false;
#else
  constexpr bool kUseMappings = true;
#endif
  if (kUseMappings && padded >= kMappedThreshold) {
    // Page-aligned (so 64-byte aligned) and already zero.
    void* p = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, padded, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
    data_ = p;
    bytes_ = bytes;
    mapped_ = padded;
    return;
  }
  void* p = heap_aligned(padded);
  if (zero) std::memset(p, 0, padded);
  data_ = p;
  bytes_ = bytes;
}

void AlignedBuffer::release() {
  if (data_) {
    if (mapped_)
      ::munmap(data_, mapped_);
    else
      heap_free(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
  mapped_ = 0;
}

void FileStorage::create(const std::string& path) {
  close_and_unlink();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_errno(errno, "cannot create " + path);
  fd_ = fd;
  path_ = path;
  bytes_ = 0;
}

void FileStorage::resize(int64_t bytes) {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (bytes < 0) throw_errno(EINVAL, "negative file size");
  int rc;
  do {
    rc = ::ftruncate(fd_, static_cast<off_t>(bytes));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno(errno, "cannot resize " + path_);
  bytes_ = bytes;
}

void FileStorage::read(int64_t offset, void* dst, int64_t n) const {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot read " + path_);
    }
    // End of file before n bytes: the slots asked for do not exist.
    if (r == 0) throw_errno(EIO, "short read from " + path_);
    p += r;
    offset += r;
    n -= r;
  }
}

void FileStorage::write(int64_t offset, const void* src, int64_t n) {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  const auto* p = static_cast<const char*>(src);
  int64_t end = offset + n;
  while (n > 0) {
    ssize_t r = ::pwrite(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot write " + path_);
    }
    if (r == 0) throw_errno(ENOSPC, "short write to " + path_);
    p += r;
    offset += r;
    n -= r;
  }
  if (end > bytes_) bytes_ = end;
}

void FileStorage::close_and_unlink() {
  if (fd_ >= 0) {
    ::close(fd_);  // no EINTR retry: on Linux the descriptor is gone either way
    fd_ = -1;
  }
  if (!path_.empty()) {
    ::unlink(path_.c_str());  // best effort: already gone is fine
    path_.clear();
  }
  bytes_ = 0;
}

void FileStorage::close_keep_file() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  path_.clear();
  bytes_ = 0;
}

}  // namespace sw

// FileStorage (files/file_storage.hpp): slots in a binary file.
#include "files/file_storage.hpp"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "files/fd_closer.hpp"

namespace sw {

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

}  // namespace

namespace {

std::atomic<uint64_t> g_fork_epoch{0};

void bump_fork_epoch() { g_fork_epoch.fetch_add(1, std::memory_order_acq_rel); }

int open_retrying(const char* path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

uint64_t fork_epoch() noexcept {
  // Registered once, before any file could be shared: both sides of a fork
  // move to a new generation.
  static const bool registered = [] {
    pthread_atfork(nullptr, bump_fork_epoch, bump_fork_epoch);
    return true;
  }();
  (void)registered;
  return g_fork_epoch.load(std::memory_order_acquire);
}

void FileStorage::create(const std::string& path) {
  close_and_unlink();
  const int fd = open_retrying(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(errno, "cannot create " + path);
  adopt(fd, path, 0, Kind{false, true, false});
}

void FileStorage::adopt(int fd, const std::string& path, int64_t bytes, Kind kind) {
  std::lock_guard<std::mutex> lk(m_);
  fd_ = fd;
  path_ = path;
  bytes_ = bytes;
  base_ = 0;
  persistent_ = kind.persistent;
  writable_ = kind.writable;
  region_ = kind.region;
  unsharer_ = nullptr;
  epoch_.store(fork_epoch(), std::memory_order_release);
}

int64_t FileStorage::open_existing(const std::string& path, bool writable) {
  close_and_unlink();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below, and on a regular file the flag changes nothing.
  const int fd = open_retrying(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK, 0);
  if (fd < 0) throw_errno(errno, "cannot open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno(err, "cannot stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_errno(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, path + " is not a regular file");
  }
  adopt(fd, path, 0, Kind{true, writable, true});
  return static_cast<int64_t>(st.st_size);
}

void FileStorage::set_region(int64_t base, int64_t bytes) {
  if (base < 0 || bytes < 0) throw_errno(EINVAL, "negative file region");
  base_ = base;
  bytes_ = bytes;
}

void FileStorage::create_persistent(const std::string& path, int64_t bytes) {
  close_and_unlink();
  if (bytes < 0) throw_errno(EINVAL, "negative file size");
  const int fd = open_retrying(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno(errno, "cannot create " + path);
  int rc;
  do {
    rc = ::ftruncate(fd, static_cast<off_t>(bytes));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());  // created just now, by us
    throw_errno(err, "cannot size " + path);
  }
  adopt(fd, path, bytes, Kind{true, true, false});
}

std::string FileStorage::path() const {
  // Only an unshare changes the path while other threads use the storage;
  // without an unsharer no lock is needed (nor taken, so a user's file
  // never waits on a lock a thread of the parent held through a fork).
  if (!unsharer_) return path_;
  std::lock_guard<std::mutex> lk(m_);
  return path_;
}

void FileStorage::prepare_write() {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (!writable_) throw_errno(EBADF, "cannot write " + path() + ": it was opened read-only");
  if (unsharer_ && epoch_.load(std::memory_order_acquire) != fork_epoch()) unsharer_->unshare(*this);
}

void FileStorage::resize(int64_t bytes) {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (bytes < 0) throw_errno(EINVAL, "negative file size");
  if (region_) throw_errno(EINVAL, "an opened file region has a fixed size");
  prepare_write();
  int rc;
  do {
    rc = ::ftruncate(fd_, static_cast<off_t>(bytes));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno(errno, "cannot resize " + path());
  bytes_ = bytes;
}

void FileStorage::read(int64_t offset, void* dst, int64_t n) const {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  auto* p = static_cast<char*>(dst);
  offset += base_;
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot read " + path());
    }
    // End of file before n bytes: the slots asked for do not exist.
    if (r == 0) throw_errno(EIO, "short read from " + path());
    p += r;
    offset += r;
    n -= r;
  }
}

void FileStorage::write(int64_t offset, const void* src, int64_t n) {
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  prepare_write();
  const auto* p = static_cast<const char*>(src);
  const int64_t end = offset + n;
  offset += base_;
  while (n > 0) {
    ssize_t r = ::pwrite(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot write " + path());
    }
    if (r == 0) throw_errno(ENOSPC, "short write to " + path());
    p += r;
    offset += r;
    n -= r;
  }
  if (end > bytes_) bytes_ = end;
}

namespace {
// Calls io(fd, iov, n, offset) until all of iov went through; returns the bytes.
template <class IO>
int64_t vectored(int fd, int64_t offset, const ::iovec* iov, int n, IO io, const char* what, int short_errno,
                 const std::string& path) {
  if (fd < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  std::vector<::iovec> left(iov, iov + n);
  size_t first = 0;
  int64_t total = 0;
  while (first < left.size()) {
    if (left[first].iov_len == 0) {
      ++first;
      continue;
    }
    const int count = static_cast<int>(std::min<size_t>(left.size() - first, IOV_MAX));
    ssize_t r = io(fd, left.data() + first, count, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, std::string("cannot ") + what + " " + path);
    }
    if (r == 0) throw_errno(short_errno, std::string("short ") + what + " of " + path);
    offset += r;
    total += r;
    for (size_t done = static_cast<size_t>(r); done > 0;) {
      const size_t step = std::min(done, left[first].iov_len);
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + step;
      left[first].iov_len -= step;
      done -= step;
      if (left[first].iov_len == 0) ++first;
    }
  }
  return total;
}
}  // namespace

void FileStorage::read_pieces(int64_t offset, const ::iovec* iov, int n) const {
  if (offset < 0) throw_errno(EINVAL, "negative file offset or length");
  vectored(fd_, base_ + offset, iov, n, ::preadv, "read", EIO, path());
}

void FileStorage::write_pieces(int64_t offset, const ::iovec* iov, int n) {
  if (offset < 0) throw_errno(EINVAL, "negative file offset or length");
  prepare_write();
  const int64_t end = offset + vectored(fd_, base_ + offset, iov, n, ::pwritev, "write", ENOSPC, path());
  if (end > bytes_) bytes_ = end;
}

void FileStorage::close_and_unlink() {
  std::unique_lock<std::mutex> lk(m_);
  if (persistent_) {
    // A user's file: never removed, and its page cache stays useful, so
    // the close is cheap and runs here.
    lk.unlock();
    close_keep_file();
    return;
  }
  if (fd_ >= 0 && bytes_ >= kDeferredCloseBytes) {
    // The name goes now (the open descriptor keeps the inode), so the file
    // is gone from the file system when this returns; the last close, which
    // frees its page cache and blocks at a cost that grows with its size,
    // runs on the background closer (files/fd_closer.hpp).
    if (!path_.empty()) ::unlink(path_.c_str());
    path_.clear();
    close_in_background(fd_, bytes_);
    fd_ = -1;
    bytes_ = 0;
    unsharer_ = nullptr;
    return;
  }
  // A small file: closed first, then removed, so the unlink frees the inode
  // at once (removing an open file puts it on ext4's orphan list, one more
  // journal update). Below kDeferredCloseBytes that teardown costs less than
  // the hand-off.
  if (fd_ >= 0) {
    ::close(fd_);  // no EINTR retry: on Linux the descriptor is gone either way
    fd_ = -1;
  }
  if (!path_.empty()) {
    ::unlink(path_.c_str());  // best effort: already gone is fine
    path_.clear();
  }
  bytes_ = 0;
  unsharer_ = nullptr;
}

void FileStorage::close_keep_file() {
  std::lock_guard<std::mutex> lk(m_);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  path_.clear();
  bytes_ = 0;
  base_ = 0;
  persistent_ = false;
  writable_ = true;
  region_ = false;
  unsharer_ = nullptr;
}

}  // namespace sw

// Bulk file span copies (see files/io.hpp).
#include "files/io.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/fs.h>
#endif

#include <algorithm>
#include <cerrno>
#include <memory>
#include <system_error>

namespace sw {

namespace {
void check(int64_t first, int64_t count, int itemsize) {
  if (first < 0 || count < 0 || itemsize <= 0)
    throw std::system_error(EINVAL, std::generic_category(), "invalid file span");
}
[[noreturn]] void fail(int err, const char* what) { throw std::system_error(err, std::generic_category(), what); }

// Copies [off, off + n) of src to the same offsets of dst through a bounded
// buffer.
void copy_through_buffer(int src, int dst, int64_t off, int64_t n) {
  const int64_t cap = std::min(kFileChunkBytes, n);
  std::unique_ptr<char[]> buf(new char[static_cast<size_t>(cap)]);
  while (n > 0) {
    const ssize_t r = ::pread(src, buf.get(), static_cast<size_t>(std::min(cap, n)), static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(errno, "cannot read the file to copy");
    if (r == 0) fail(EIO, "short read from the file to copy");
    for (ssize_t done = 0; done < r;) {
      const ssize_t w = ::pwrite(dst, buf.get() + done, static_cast<size_t>(r - done), static_cast<off_t>(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) fail(errno, "cannot write the file copy");
      if (w == 0) fail(ENOSPC, "short write to the file copy");
      done += w;
    }
    off += r;
    n -= r;
  }
}

// Copies [off, off + n) of src to the same offsets of dst, in the kernel
// while copy_file_range serves this pair (*usable), else through a buffer.
void copy_in_kernel(int src, int dst, int64_t off, int64_t n, bool* usable) {
#ifdef __linux__
  while (n > 0 && *usable) {
    loff_t in = off, out = off;
    const ssize_t r = ::copy_file_range(src, &in, dst, &out, static_cast<size_t>(n), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == EPERM)) {
      *usable = false;  // the buffer copies the rest
      break;
    }
    if (r < 0) fail(errno, "cannot copy the file");
    if (r == 0) fail(EIO, "short copy of the file");
    off += r;
    n -= r;
  }
#else
  *usable = false;
#endif
  if (n > 0) copy_through_buffer(src, dst, off, n);
}

}  // namespace

void copy_file_data(int src_fd, int dst_fd, int64_t bytes) {
  if (bytes < 0) fail(EINVAL, "negative file size");
  auto size_to = [&](int64_t n) {
    int rc;
    do {
      rc = ::ftruncate(dst_fd, static_cast<off_t>(n));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) fail(errno, "cannot size the file copy");
  };
#ifdef FICLONE
  if (::ioctl(dst_fd, FICLONE, src_fd) == 0) {
    size_to(bytes);  // the clone has the source's length
    return;
  }
#endif
  size_to(0);
  size_to(bytes);  // holes: zeros that cost no blocks
  bool in_kernel = true;
  for (int64_t off = 0; off < bytes;) {
    // The next data extent; a file system without SEEK_DATA reports the
    // whole rest as data.
    off_t data = ::lseek(src_fd, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole up to the end
      data = static_cast<off_t>(off);
    }
    if (data >= bytes) break;
    off_t hole = ::lseek(src_fd, data, SEEK_HOLE);
    if (hole < 0 || hole > bytes) hole = static_cast<off_t>(bytes);
    if (hole <= data) hole = static_cast<off_t>(bytes);
    copy_in_kernel(src_fd, dst_fd, data, hole - data, &in_kernel);
    off = hole;
  }
}

void file_read_span(const FileStorage& f, int64_t first, void* dst, int64_t count, int itemsize) {
  check(first, count, itemsize);
  const int64_t total = count * itemsize;
  auto* p = static_cast<char*>(dst);
  for (int64_t done = 0; done < total;) {
    const int64_t n = std::min(kFileChunkBytes, total - done);
    f.read(first * itemsize + done, p + done, n);
    done += n;
  }
}

void file_write_span(FileStorage& f, int64_t first, const void* src, int64_t count, int itemsize) {
  check(first, count, itemsize);
  const int64_t total = count * itemsize;
  const auto* p = static_cast<const char*>(src);
  for (int64_t done = 0; done < total;) {
    const int64_t n = std::min(kFileChunkBytes, total - done);
    f.write(first * itemsize + done, p + done, n);
    done += n;
  }
}

void file_copy_span(const FileStorage& src, int64_t src_first, FileStorage& dst, int64_t dst_first,
                    int64_t count, int itemsize) {
  check(src_first, count, itemsize);
  check(dst_first, count, itemsize);
  const int64_t total = count * itemsize;
  if (total == 0) return;
  const int64_t cap = std::min(kFileChunkBytes, total);
  std::unique_ptr<char[]> buf(new char[static_cast<size_t>(cap)]);
  for (int64_t done = 0; done < total;) {
    const int64_t n = std::min(cap, total - done);
    src.read(src_first * itemsize + done, buf.get(), n);
    dst.write(dst_first * itemsize + done, buf.get(), n);
    done += n;
  }
}

}  // namespace sw

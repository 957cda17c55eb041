// Bulk file span copies (see file_io.hpp).
#include "file_io.hpp"

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
}  // namespace

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

// FileStorage::close_and_unlink: the file is gone from the file system and
// its descriptor closed when the call returns, whatever its size.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "storage.hpp"

namespace {

class TempDir {
 public:
  TempDir() {
    char buf[] = "/tmp/sw-file-release-XXXXXX";
    const char* d = ::mkdtemp(buf);
    if (d) path_ = d;
  }
  ~TempDir() { ::rmdir(path_.c_str()); }
  std::string file(const char* name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// The descriptor the storage holds: the lowest one open right after create.
int probe_next_fd() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ::close(fd);
  return fd;
}

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

void fill(sw::FileStorage& f, int64_t bytes) {
  f.resize(bytes);
  std::vector<char> data(static_cast<size_t>(bytes), 7);
  f.write(0, data.data(), bytes);
}

}  // namespace

TEST(FileRelease, SmallFileIsRemovedAndClosedAtOnce) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("small.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  fill(f, 4096);
  ASSERT_TRUE(fd_open(fd));
  f.close_and_unlink();
  EXPECT_FALSE(exists(p));
  EXPECT_FALSE(fd_open(fd));
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(f.bytes(), 0);
}

TEST(FileRelease, LargeFileIsRemovedAndClosedAtOnce) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("large.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  fill(f, int64_t(4) << 20);
  f.close_and_unlink();
  EXPECT_FALSE(exists(p));
  EXPECT_FALSE(fd_open(fd));
  EXPECT_FALSE(f.is_open());
  f.close_and_unlink();  // idempotent
}

TEST(FileRelease, DestructorRemovesALargeFile) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("dtor.bin");
  {
    sw::FileStorage f;
    f.create(p);
    fill(f, int64_t(1) << 20);
  }
  EXPECT_FALSE(exists(p));
}

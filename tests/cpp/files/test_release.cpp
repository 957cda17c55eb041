// FileStorage::close_and_unlink: the file is gone from the file system when
// the call returns, whatever its size; its descriptor is closed by then too,
// except a file of kDeferredCloseBytes up, whose descriptor the background
// closer (files/fd_closer.hpp) closes shortly after.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "files/fd_closer.hpp"
#include "files/file_storage.hpp"
#include "files_support.hpp"

namespace {

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
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("small.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  fill(f, 4096);
  ASSERT_TRUE(fd_open(fd));
  f.close_and_unlink();
  EXPECT_FALSE(swtest::exists(p));
  EXPECT_FALSE(fd_open(fd));
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(f.bytes(), 0);
}

TEST(FileRelease, FileJustBelowTheDeferralIsRemovedAndClosedAtOnce) {
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("below.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  fill(f, sw::kDeferredCloseBytes - 4096);
  f.close_and_unlink();
  EXPECT_FALSE(swtest::exists(p));
  EXPECT_FALSE(fd_open(fd));
  EXPECT_FALSE(f.is_open());
  f.close_and_unlink();  // idempotent
}

TEST(FileRelease, DeferredFileIsRemovedAtOnceAndClosedByTheCloser) {
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("deferred.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  fill(f, int64_t(4) << 20);
  f.close_and_unlink();
  EXPECT_FALSE(swtest::exists(p)) << "the name must be gone when close_and_unlink returns";
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(f.bytes(), 0);
  sw::wait_background_closes();
  EXPECT_FALSE(fd_open(fd)) << "the closer did not close the descriptor";
  f.close_and_unlink();  // idempotent
}

TEST(FileRelease, VeryLargeFileIsRemovedAtOnceAndClosedSoonAfter) {
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("huge.bin");
  const int fd = probe_next_fd();
  sw::FileStorage f;
  f.create(p);
  f.resize(sw::kDeferredCloseBytes);  // sparse: only the size counts
  f.write(sw::kDeferredCloseBytes - 4, "abcd", 4);
  f.close_and_unlink();
  EXPECT_FALSE(swtest::exists(p)) << "the name must be gone when close_and_unlink returns";
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(f.bytes(), 0);
  bool closed = false;
  for (int k = 0; k < 2000 && !closed; ++k) {
    closed = !fd_open(fd);
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(closed) << "the worker never closed the descriptor";
  f.close_and_unlink();  // idempotent
}

TEST(FileRelease, DestructorRemovesALargeFile) {
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string p = dir.file("dtor.bin");
  {
    sw::FileStorage f;
    f.create(p);
    f.resize(sw::kDeferredCloseBytes);
  }
  EXPECT_FALSE(swtest::exists(p));
}

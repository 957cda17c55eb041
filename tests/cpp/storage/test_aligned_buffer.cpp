// AlignedBuffer and FileStorage.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "files/file_storage.hpp"
#include "storage/aligned_buffer.hpp"

namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

class TempDir {
 public:
  TempDir() {
    char buf[] = "/tmp/sw-storage-test-XXXXXX";
    char* d = ::mkdtemp(buf);
    if (d) path_ = d;
  }
  ~TempDir() { ::rmdir(path_.c_str()); }
  std::string file(const char* name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST(AlignedBuffer, AlignedForManySizes) {
  for (size_t n : {0u, 1u, 3u, 63u, 64u, 65u, 1000u, 4096u, 100001u}) {
    sw::AlignedBuffer b;
    b.allocate(n, true);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sw::kStorageAlignment, 0u) << n;
    EXPECT_EQ(b.bytes(), n);
    const auto* p = static_cast<const unsigned char*>(b.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0) << n << " " << i;
  }
}

TEST(AlignedBuffer, ReleaseIsIdempotent) {
  sw::AlignedBuffer b;
  b.allocate(16, false);
  b.release();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
  b.release();
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, MoveTransfersOwnership) {
  sw::AlignedBuffer a;
  a.allocate(128, true);
  void* p = a.data();
  sw::AlignedBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.bytes(), 128u);
  sw::AlignedBuffer c;
  c.allocate(8, false);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
}

TEST(AlignedBuffer, ReallocateReplaces) {
  sw::AlignedBuffer b;
  b.allocate(4, true);
  static_cast<unsigned char*>(b.data())[0] = 7;
  b.allocate(256, true);
  EXPECT_EQ(b.bytes(), 256u);
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[0], 0);
}

TEST(AlignedBuffer, HugeAllocationThrowsBadAlloc) {
  sw::AlignedBuffer b;
  EXPECT_THROW(b.allocate(SIZE_MAX - 8, false), std::bad_alloc);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(FileStorage, CreateWriteReadResizeUnlink) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string p = dir.file("a.bin");
  {
    sw::FileStorage f;
    EXPECT_FALSE(f.is_open());
    f.create(p);
    EXPECT_TRUE(f.is_open());
    EXPECT_EQ(f.path(), p);
    EXPECT_EQ(f.bytes(), 0);
    EXPECT_TRUE(exists(p));
    f.resize(16);
    EXPECT_EQ(f.bytes(), 16);
    unsigned char buf[16];
    std::memset(buf, 0xff, sizeof buf);
    f.read(0, buf, 16);
    for (unsigned char c : buf) EXPECT_EQ(c, 0);  // growth zero-fills
    double d = 2.5;
    f.write(8, &d, 8);
    double back = 0;
    f.read(8, &back, 8);
    EXPECT_EQ(back, 2.5);
    // Writing past the end extends the file.
    int32_t x = -7;
    f.write(20, &x, 4);
    EXPECT_EQ(f.bytes(), 24);
    int32_t xb = 0;
    f.read(20, &xb, 4);
    EXPECT_EQ(xb, -7);
    f.resize(4);
    EXPECT_EQ(f.bytes(), 4);
    f.close_and_unlink();
    EXPECT_FALSE(f.is_open());
    EXPECT_FALSE(exists(p));
    EXPECT_TRUE(f.path().empty());
    f.close_and_unlink();  // idempotent
  }
}

TEST(FileStorage, DestructorUnlinks) {
  TempDir dir;
  std::string p = dir.file("b.bin");
  {
    sw::FileStorage f;
    f.create(p);
    ASSERT_TRUE(exists(p));
  }
  EXPECT_FALSE(exists(p));
}

TEST(FileStorage, CloseKeepFileLeavesTheFile) {
  TempDir dir;
  std::string p = dir.file("k.bin");
  {
    sw::FileStorage f;
    f.create(p);
    f.close_keep_file();
    EXPECT_FALSE(f.is_open());
    EXPECT_TRUE(f.path().empty());
    f.close_keep_file();  // idempotent
  }  // the destructor has nothing left to remove
  EXPECT_TRUE(exists(p));
  ::unlink(p.c_str());
}

TEST(FileStorage, ExistingFileIsEexist) {
  TempDir dir;
  std::string p = dir.file("c.bin");
  sw::FileStorage a;
  a.create(p);
  sw::FileStorage b;
  try {
    b.create(p);
    FAIL() << "expected EEXIST";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EEXIST);
  }
  EXPECT_FALSE(b.is_open());
  EXPECT_TRUE(exists(p));  // the failed create did not remove a's file
}

TEST(FileStorage, ReadPastEndThrows) {
  TempDir dir;
  sw::FileStorage f;
  f.create(dir.file("d.bin"));
  f.resize(4);
  char buf[8];
  EXPECT_THROW(f.read(0, buf, 8), std::system_error);
  EXPECT_THROW(f.read(-1, buf, 1), std::system_error);
}

TEST(FileStorage, ClosedStorageThrowsEbadf) {
  sw::FileStorage f;
  char buf[1] = {0};
  try {
    f.write(0, buf, 1);
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EBADF);
  }
  EXPECT_THROW(f.read(0, buf, 1), std::system_error);
  EXPECT_THROW(f.resize(1), std::system_error);
}

TEST(FileStorage, MissingDirectoryIsEnoent) {
  sw::FileStorage f;
  try {
    f.create("/nonexistent-sw-dir/x.bin");
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
  }
}

TEST(AlignedBuffer, LargeBuffersAreZeroedAlignedMappings) {
  sw::AlignedBuffer b;
  const size_t n = sw::kMappedThreshold + 3;
  b.allocate(n, /*zero=*/true);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sw::kStorageAlignment, 0u);
  EXPECT_EQ(b.bytes(), n);
  const unsigned char* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < n; i += 4093) EXPECT_EQ(p[i], 0);
  static_cast<unsigned char*>(b.data())[n - 1] = 7;  // whole span writable
  sw::AlignedBuffer moved(std::move(b));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(static_cast<const unsigned char*>(moved.data())[n - 1], 7);
  sw::AlignedBuffer assigned;
  assigned.allocate(16, true);
  assigned = std::move(moved);  // frees the small one, takes the mapping
  EXPECT_EQ(assigned.bytes(), n);
  assigned.release();
  EXPECT_EQ(assigned.data(), nullptr);
}

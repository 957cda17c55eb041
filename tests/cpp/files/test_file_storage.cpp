// FileStorage: create, read, write, resize, close and unlink, and the
// errno of each failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "files/file_storage.hpp"
#include "files_support.hpp"

TEST(FileStorage, CreateWriteReadResizeUnlink) {
  swtest::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  std::string p = dir.file("a.bin");
  {
    sw::FileStorage f;
    EXPECT_FALSE(f.is_open());
    f.create(p);
    EXPECT_TRUE(f.is_open());
    EXPECT_EQ(f.path(), p);
    EXPECT_EQ(f.bytes(), 0);
    EXPECT_TRUE(swtest::exists(p));
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
    EXPECT_FALSE(swtest::exists(p));
    EXPECT_TRUE(f.path().empty());
    f.close_and_unlink();  // idempotent
  }
}

TEST(FileStorage, DestructorUnlinks) {
  swtest::ScratchDir dir;
  std::string p = dir.file("b.bin");
  {
    sw::FileStorage f;
    f.create(p);
    ASSERT_TRUE(swtest::exists(p));
  }
  EXPECT_FALSE(swtest::exists(p));
}

TEST(FileStorage, CloseKeepFileLeavesTheFile) {
  swtest::ScratchDir dir;
  std::string p = dir.file("k.bin");
  {
    sw::FileStorage f;
    f.create(p);
    f.close_keep_file();
    EXPECT_FALSE(f.is_open());
    EXPECT_TRUE(f.path().empty());
    f.close_keep_file();  // idempotent
  }  // the destructor has nothing left to remove
  EXPECT_TRUE(swtest::exists(p));
  ::unlink(p.c_str());
}

TEST(FileStorage, ExistingFileIsEexist) {
  swtest::ScratchDir dir;
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
  EXPECT_TRUE(swtest::exists(p));  // the failed create did not remove a's file
}

TEST(FileStorage, ReadPastEndThrows) {
  swtest::ScratchDir dir;
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

// Temporary files behave like memory across fork (FileStore::unshare): the
// first write after a fork, in whichever process writes, gives that process
// a private copy; the creator keeps its file's name. copy_file_data makes
// the copy (holes stay holes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "files/file_storage.hpp"
#include "files/io.hpp"
#include "files/store.hpp"
#include "files/temp_directory.hpp"
#include "files_support.hpp"

namespace {

using swtest::exists;
using swtest::wait_exit_code;

ino_t inode_of(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

double slot(const sw::FileStorage& f, int64_t i) {
  double v = -1;
  f.read(i * 8, &v, 8);
  return v;
}

void set_slot(sw::FileStorage& f, int64_t i, double v) { f.write(i * 8, &v, 8); }

// One byte through a pipe: the two processes take turns.
struct Turn {
  int fds[2];
  Turn() { EXPECT_EQ(::pipe(fds), 0); }
  ~Turn() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void pass() { EXPECT_EQ(::write(fds[1], "x", 1), 1); }
  bool wait() {
    char c;
    return ::read(fds[0], &c, 1) == 1;
  }
};

class FileForkCopyTest : public swtest::ScratchDirTest {
 protected:
  sw::FileStore::BaseFn base() {
    return [this] { return dir_; };
  }
  const std::string& base_ = dir_;
};

TEST_F(FileForkCopyTest, WritesAfterForkStayInTheWritingProcess) {
  sw::FileStore store;
  sw::FileStorage f;
  const std::string name = "values.bin";
  const std::string path = store.create(f, nullptr, &name, nullptr, base());
  f.resize(4 * 8);
  for (int i = 0; i < 4; ++i) set_slot(f, i, i + 0.5);
  Turn to_parent, to_child;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes name the failed check.
    set_slot(f, 0, 42.0);
    const std::string mine = f.path();
    if (mine == path || sw::parent_directory(sw::parent_directory(mine)) != sw::parent_directory(path)) ::_exit(2);
    if (mine.substr(mine.rfind('/') + 1) != name) ::_exit(3);  // its own directory, the same name
    to_parent.pass();
    if (!to_child.wait()) ::_exit(4);
    if (slot(f, 0) != 42.0 || slot(f, 1) != 1.5 || slot(f, 3) != 3.5) ::_exit(5);  // not the parent's 7.0
    store.close(f);
    ::_exit(exists(mine) ? 6 : 0);  // its copy is its own to remove
  }
  ASSERT_TRUE(to_parent.wait());
  EXPECT_EQ(slot(f, 0), 0.5) << "the child's write reached the parent";
  set_slot(f, 1, 7.0);
  EXPECT_EQ(f.path(), path) << "the creator keeps its file's name";
  to_child.pass();
  EXPECT_EQ(wait_exit_code(pid), 0);
  EXPECT_EQ(slot(f, 1), 7.0);
  EXPECT_EQ(slot(f, 2), 2.5);
  store.close_all(nullptr);
  EXPECT_FALSE(exists(path));
}

TEST_F(FileForkCopyTest, ReadersShareAndTheFirstWriterCopiesOnce) {
  sw::FileStore store;
  sw::FileStorage f;
  const std::string path = store.create(f, nullptr, nullptr, nullptr, base());
  f.resize(64 * 8);
  const ino_t before = inode_of(path);
  Turn done;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool same = slot(f, 3) == 0.0 && f.path() == path;  // a read copies nothing
    done.wait();
    ::_exit(same ? 0 : 1);
  }
  // Several threads write at once after the fork: one copy, every write in it.
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&f, t] {
      for (int i = t * 16; i < (t + 1) * 16; ++i) set_slot(f, i, i);
    });
  for (auto& w : writers) w.join();
  EXPECT_EQ(f.path(), path);
  EXPECT_NE(inode_of(path), before) << "the parent writes into its own copy";
  for (int i = 0; i < 64; ++i) ASSERT_EQ(slot(f, i), i);
  const ino_t copy = inode_of(path);
  set_slot(f, 0, 1.0);  // no fork since: no second copy
  EXPECT_EQ(inode_of(path), copy);
  done.pass();
  EXPECT_EQ(wait_exit_code(pid), 0);
  store.close_all(nullptr);
}

TEST_F(FileForkCopyTest, AnEmptyFileGrownAfterForkIsPrivateToo) {
  sw::FileStore store;
  sw::FileStorage f;
  store.create(f, nullptr, nullptr, nullptr, base());
  Turn to_parent;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    f.resize(16);  // a move into an empty destination grows it first
    set_slot(f, 1, 3.0);
    to_parent.pass();
    ::_exit(slot(f, 1) == 3.0 ? 0 : 1);
  }
  ASSERT_TRUE(to_parent.wait());
  struct stat st;
  ASSERT_EQ(::stat(f.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "the child's growth reached the parent's file";
  EXPECT_EQ(wait_exit_code(pid), 0);
  store.close_all(nullptr);
}

TEST_F(FileForkCopyTest, AChildsCopyOfAFileInACallersDirectoryStaysThere) {
  const std::string user = base_ + "/user";
  ASSERT_EQ(::mkdir(user.c_str(), 0700), 0);
  sw::FileStore store;
  sw::FileStorage f;
  const std::string name = "mine.bin";
  const std::string path = store.create(f, nullptr, &name, &user, base());
  f.resize(8);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    set_slot(f, 0, 9.0);
    const std::string copy = f.path();
    const bool ok = copy != path && sw::parent_directory(copy) == user && slot(f, 0) == 9.0;
    store.close_all(nullptr);
    ::_exit(ok && !exists(copy) && exists(path) ? 0 : 1);
  }
  EXPECT_EQ(wait_exit_code(pid), 0);
  EXPECT_EQ(slot(f, 0), 0.0);
  store.close_all(nullptr);
  EXPECT_FALSE(exists(path));
}

TEST(CopyFileData, CopiesTheBytesAndKeepsHoles) {
  const std::string dir = testing::TempDir();
  const std::string a = dir + "sw_cfd_a_" + std::to_string(::getpid());
  const std::string b = dir + "sw_cfd_b_" + std::to_string(::getpid());
  const int src = ::open(a.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int dst = ::open(b.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(src, 0);
  ASSERT_GE(dst, 0);
  const int64_t size = int64_t(16) << 20;
  ASSERT_EQ(::ftruncate(src, size), 0);
  const std::string head = "head", tail = "tail";
  ASSERT_EQ(::pwrite(src, head.data(), 4, 0), 4);
  ASSERT_EQ(::pwrite(src, tail.data(), 4, size - 4), 4);
  ASSERT_EQ(::pwrite(dst, "stale bytes", 11, 0), 11);
  sw::copy_file_data(src, dst, size);
  struct stat st;
  ASSERT_EQ(::fstat(dst, &st), 0);
  EXPECT_EQ(st.st_size, size);
  EXPECT_LT(st.st_blocks * 512, int64_t(4) << 20) << "the hole was written out";
  char buf[4];
  ASSERT_EQ(::pread(dst, buf, 4, 0), 4);
  EXPECT_EQ(std::string(buf, 4), "head");
  ASSERT_EQ(::pread(dst, buf, 4, size - 4), 4);
  EXPECT_EQ(std::string(buf, 4), "tail");
  ASSERT_EQ(::pread(dst, buf, 4, size / 2), 4);
  EXPECT_EQ(std::string(buf, 4), std::string(4, '\0'));
  // A prefix only: the copy ends where asked.
  sw::copy_file_data(src, dst, 2);
  ASSERT_EQ(::fstat(dst, &st), 0);
  EXPECT_EQ(st.st_size, 2);
  ::close(src);
  ::close(dst);
  ::unlink(a.c_str());
  ::unlink(b.c_str());
}

}  // namespace

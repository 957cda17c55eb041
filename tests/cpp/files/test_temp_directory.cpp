// sw::TempDirectory: lazy creation under a base, re-creation after it
// vanished, the fork rule and the recursive sweep.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>

#include "files/temp_directory.hpp"
#include "files_support.hpp"

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string dirname_of(const std::string& p) { return p.substr(0, p.rfind('/')); }

// A fresh, empty base directory per test (dir_), removed afterwards.
using TempDirectoryTest = swtest::ScratchDirTest;

TEST_F(TempDirectoryTest, CreatedLazilyUnderTheBase) {
  sw::TempDirectory d("sw-test-");
  EXPECT_EQ(d.path(), "");
  EXPECT_FALSE(d.ready());
  const std::string p = d.ensure(dir_);
  EXPECT_EQ(dirname_of(p), dir_);
  EXPECT_EQ(p.rfind(dir_ + "/sw-test-", 0), 0u);
  EXPECT_TRUE(is_dir(p));
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(d.ready() && d.owned());
  EXPECT_EQ(d.ensure("/nonexistent-base"), p);  // the base matters only at creation
}

TEST_F(TempDirectoryTest, AMissingBaseThrowsENOENT) {
  sw::TempDirectory d;
  try {
    d.ensure(dir_ + "/missing");
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
  }
  EXPECT_EQ(d.path(), "");
}

TEST_F(TempDirectoryTest, AVanishedDirectoryIsRecreated) {
  sw::TempDirectory d;
  const std::string first = d.ensure(dir_);
  swtest::touch(first + "/f.bin");
  sw::remove_tree(first);
  ASSERT_FALSE(swtest::exists(first));
  EXPECT_FALSE(d.ready());
  const std::string second = d.ensure(dir_);
  EXPECT_TRUE(is_dir(second));
  EXPECT_EQ(dirname_of(second), dir_);
  EXPECT_TRUE(d.ready());
}

TEST_F(TempDirectoryTest, RemoveSweepsRecursivelyWithoutFollowingLinks) {
  const std::string outside = dir_ + "/outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  swtest::touch(outside + "/keep.bin");
  sw::TempDirectory d;
  const std::string p = d.ensure(dir_);
  swtest::touch(p + "/a.bin");
  ASSERT_EQ(::mkdir((p + "/nested").c_str(), 0700), 0);
  swtest::touch(p + "/nested/b.bin");
  ASSERT_EQ(::symlink(outside.c_str(), (p + "/link").c_str()), 0);
  d.remove();
  EXPECT_FALSE(swtest::exists(p));
  EXPECT_EQ(d.path(), "");
  EXPECT_TRUE(swtest::exists(outside + "/keep.bin"));  // the link was removed, not followed
  d.remove();                                  // idempotent
  EXPECT_TRUE(is_dir(d.ensure(dir_)));        // usable again
}

TEST_F(TempDirectoryTest, TheDestructorSweeps) {
  std::string p;
  {
    sw::TempDirectory d;
    p = d.ensure(dir_);
    swtest::touch(p + "/a.bin");
  }
  EXPECT_FALSE(swtest::exists(p));
}

TEST_F(TempDirectoryTest, AForkedChildNestsItsOwnDirectoryAndNeverRemovesTheParents) {
  sw::TempDirectory d;
  const std::string parent = d.ensure(dir_);
  swtest::touch(parent + "/parent.bin");
  const std::string child_path_file = dir_ + "/child-path";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes name the failed check; _exit skips gtest's own teardown.
    if (d.ready() || d.owned()) ::_exit(2);  // the parent's is not the child's
    std::string mine;
    try {
      mine = d.ensure(dir_);
    } catch (...) {
      ::_exit(3);
    }
    if (mine == parent || dirname_of(mine) != parent) ::_exit(4);
    swtest::touch(mine + "/child.bin");
    std::ofstream(child_path_file) << mine;
    // A child that removes its directory leaves the parent's alone.
    d.remove();
    if (swtest::exists(mine) || !swtest::exists(parent + "/parent.bin")) ::_exit(5);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(d.ready());
  EXPECT_TRUE(swtest::exists(parent + "/parent.bin"));
}

TEST_F(TempDirectoryTest, AChildThatNeverCreatesLeavesTheParentsDirectory) {
  sw::TempDirectory d;
  const std::string parent = d.ensure(dir_);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    d.remove();  // what the child's exit hook does
    ::_exit(swtest::exists(parent) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(is_dir(parent));
}

TEST_F(TempDirectoryTest, AChildsLeftoversGoWithTheParentsSweep) {
  sw::TempDirectory d;
  const std::string parent = d.ensure(dir_);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A worker killed before its cleanup: its directory stays behind.
    const std::string mine = d.ensure(dir_);
    swtest::touch(mine + "/left.bin");
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  d.remove();
  EXPECT_FALSE(swtest::exists(parent));
}

TEST_F(TempDirectoryTest, AChildOfAVanishedParentDirectoryUsesTheBase) {
  sw::TempDirectory d;
  const std::string parent = d.ensure(dir_);
  sw::remove_tree(parent);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string mine;
    try {
      mine = d.ensure(dir_);
    } catch (...) {
      ::_exit(3);
    }
    const bool ok = dirname_of(mine) == dir_;
    d.remove();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace

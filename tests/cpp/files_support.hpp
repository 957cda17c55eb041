// What the file tests share: a scratch directory per test, and small
// file-system and child-process checks.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "files/temp_directory.hpp"

namespace swtest {

inline bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

inline void touch(const std::string& p) { std::ofstream(p) << "x"; }

// The exit code of the child pid once it exited (-1: killed or not ours).
inline int wait_exit_code(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A fresh, empty directory for one scope, removed with what it holds.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = testing::TempDir() + "sw_scratch_XXXXXX";
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~ScratchDir() {
    if (ok()) sw::remove_tree(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A fresh, empty directory per test (dir_), removed afterwards.
class ScratchDirTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "sw_files_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { sw::remove_tree(dir_); }
  std::string dir_;
};

}  // namespace swtest

// sw::FileStore: name and directory rules, generated names, creation in the
// per-process directory (lazily, re-created once when it vanished), the live
// registry, the fork rule and the exit sweep.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "files/store.hpp"
#include "files_support.hpp"

namespace {

// The store's base directory is the test's scratch directory (dir_).
class FileStoreTest : public swtest::ScratchDirTest {
 protected:
  sw::FileStore::BaseFn base() {
    return [this] {
      ++base_calls_;
      return dir_;
    };
  }
  int base_calls_ = 0;
};

TEST(FileStoreRules, FileNames) {
  EXPECT_EQ(sw::check_file_name("data.bin"), sw::FileNameProblem::None);
  EXPECT_EQ(sw::check_file_name("..x"), sw::FileNameProblem::None);
  EXPECT_EQ(sw::check_file_name(""), sw::FileNameProblem::Invalid);
  EXPECT_EQ(sw::check_file_name("."), sw::FileNameProblem::Invalid);
  EXPECT_EQ(sw::check_file_name(".."), sw::FileNameProblem::Invalid);
  EXPECT_EQ(sw::check_file_name(std::string("a\0b", 3)), sw::FileNameProblem::Invalid);
  EXPECT_EQ(sw::check_file_name("a/b"), sw::FileNameProblem::HasDirectoryParts);
  EXPECT_EQ(sw::check_file_name("/abs"), sw::FileNameProblem::HasDirectoryParts);
}

TEST(FileStoreRules, ParentDirectory) {
  EXPECT_EQ(sw::parent_directory("/a/b/c.bin"), "/a/b");
  EXPECT_EQ(sw::parent_directory("/c.bin"), "");
  EXPECT_EQ(sw::parent_directory("c.bin"), "");
}

TEST(FileStoreRules, SlotBytes) {
  EXPECT_EQ(sw::file_slot_bytes(0, 8), 0);
  EXPECT_EQ(sw::file_slot_bytes(10, 4), 40);
  EXPECT_EQ(sw::file_slot_bytes(INT64_MAX / 8, 8), INT64_MAX / 8 * 8);
  EXPECT_THROW(sw::file_slot_bytes(INT64_MAX / 8 + 1, 8), std::overflow_error);
  EXPECT_THROW(sw::file_slot_bytes(-1, 8), std::invalid_argument);
  EXPECT_THROW(sw::file_slot_bytes(1, 0), std::invalid_argument);
}

TEST_F(FileStoreTest, ResolveDirectory) {
  EXPECT_EQ(sw::resolve_directory(dir_), dir_);
  EXPECT_THROW(sw::resolve_directory(""), std::invalid_argument);
  try {
    sw::resolve_directory(dir_ + "/missing");
    FAIL();
  } catch (const sw::PathError& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_EQ(e.path(), dir_ + "/missing");
  }
  std::ofstream(dir_ + "/file") << "x";
  try {
    sw::resolve_directory(dir_ + "/file");
    FAIL();
  } catch (const sw::PathError& e) {
    EXPECT_EQ(e.code().value(), ENOTDIR);
  }
  // A relative directory is made absolute against the working directory.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  ASSERT_EQ(::mkdir("sub", 0700), 0);
  const std::string resolved = sw::resolve_directory("sub");
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(resolved, dir_ + "/sub");
}

TEST_F(FileStoreTest, GeneratedNamesInThePerProcessDirectory) {
  sw::FileStore store("sw-store-");
  sw::FileStorage a, b;
  int tag_a = 0, tag_b = 0;
  const std::string pa = store.create(a, &tag_a, nullptr, nullptr, base());
  const std::string pb = store.create(b, &tag_b, nullptr, nullptr, base());
  EXPECT_EQ(base_calls_, 1);  // the base is asked for once, when the directory is made
  const std::string dir = store.directory().path();
  EXPECT_EQ(sw::parent_directory(dir), dir_);
  EXPECT_EQ(sw::parent_directory(pa), dir);
  EXPECT_NE(pa, pb);
  const std::string prefix = dir + "/sw-" + std::to_string(::getpid()) + "-";
  EXPECT_EQ(pa.rfind(prefix, 0), 0u);
  EXPECT_TRUE(a.is_open() && swtest::exists(pa) && swtest::exists(pb));
  EXPECT_EQ(store.live_count(), 2u);
  store.close(a);
  EXPECT_FALSE(a.is_open());
  EXPECT_FALSE(swtest::exists(pa));
  EXPECT_EQ(store.live_count(), 1u);
  std::vector<void*> closed;
  store.close_all([&](void* owner) { closed.push_back(owner); });
  EXPECT_EQ(closed, std::vector<void*>{&tag_b});
  EXPECT_FALSE(swtest::exists(pb));
  EXPECT_FALSE(swtest::exists(dir));
  EXPECT_EQ(store.live_count(), 0u);
  store.close_all(nullptr);  // idempotent
}

TEST_F(FileStoreTest, GeneratedNamesSkipTakenOnes) {
  sw::FileStore store;
  sw::FileStorage a, b;
  const std::string pa = store.create(a, nullptr, nullptr, nullptr, base());
  // Take the next generated name before the store gets to it.
  const std::string dir = store.directory().path();
  const std::string next = dir + "/sw-" + std::to_string(::getpid()) + "-2.bin";
  std::ofstream(next) << "user";
  const std::string pb = store.create(b, nullptr, nullptr, nullptr, base());
  EXPECT_NE(pb, next);
  EXPECT_TRUE(swtest::exists(next));
  store.close_all(nullptr);
}

TEST_F(FileStoreTest, ExplicitNameAndDirectory) {
  sw::FileStore store;
  sw::FileStorage a, b;
  const std::string name = "mine.bin";
  const std::string p = store.create(a, nullptr, &name, &dir_, base());
  EXPECT_EQ(p, dir_ + "/mine.bin");
  EXPECT_EQ(base_calls_, 0);  // a caller's directory needs no base
  try {
    store.create(b, nullptr, &name, &dir_, base());
    FAIL();
  } catch (const sw::PathError& e) {
    EXPECT_EQ(e.code().value(), EEXIST);
    EXPECT_EQ(e.path(), p);
  }
  EXPECT_FALSE(b.is_open());
  EXPECT_EQ(store.live_count(), 1u);
  store.close(a);
  EXPECT_FALSE(swtest::exists(p));
}

TEST_F(FileStoreTest, AVanishedDirectoryIsRecreated) {
  sw::FileStore store;
  sw::FileStorage a, b;
  const std::string pa = store.create(a, nullptr, nullptr, nullptr, base());
  const std::string dir = store.directory().path();
  sw::remove_tree(dir);
  const std::string pb = store.create(b, nullptr, nullptr, nullptr, base());
  EXPECT_TRUE(swtest::exists(pb));
  EXPECT_NE(sw::parent_directory(pb), dir);
  EXPECT_EQ(base_calls_, 2);
  store.close_all(nullptr);
}

TEST_F(FileStoreTest, BaseErrorsNameTheBase) {
  sw::FileStore store;
  sw::FileStorage a;
  const std::string missing = dir_ + "/missing";
  try {
    store.create(a, nullptr, nullptr, nullptr, [&] { return missing; });
    FAIL();
  } catch (const sw::PathError& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_EQ(e.path(), missing);
  }
  struct Raised {};
  EXPECT_THROW(store.create(a, nullptr, nullptr, nullptr, []() -> std::string { throw Raised{}; }), Raised);
  EXPECT_THROW(store.prepare_fork([]() -> std::string { throw Raised{}; }), Raised);
  EXPECT_EQ(store.live_count(), 0u);
}

TEST_F(FileStoreTest, PrepareForkCreatesTheDirectoryOnce) {
  sw::FileStore store;
  store.prepare_fork(base());
  EXPECT_TRUE(store.directory().ready());
  store.prepare_fork(base());
  EXPECT_EQ(base_calls_, 1);
  store.close_all(nullptr);
  EXPECT_FALSE(store.directory().ready());
}

TEST_F(FileStoreTest, ExitHookOncePerProcess) {
  sw::FileStore store;
  EXPECT_TRUE(store.needs_exit_hook());
  EXPECT_FALSE(store.needs_exit_hook());
  sw::FileStore hooked;
  hooked.mark_exit_hooked();
  EXPECT_FALSE(hooked.needs_exit_hook());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(hooked.needs_exit_hook() && !hooked.needs_exit_hook() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A forked child closes its inherited files without removing them, on
// close() and at exit; the parent still removes them.
TEST_F(FileStoreTest, ForkedChildLeavesTheParentsFiles) {
  sw::FileStore store;
  sw::FileStorage a, b;
  int tag = 0;
  const std::string pa = store.create(a, &tag, nullptr, nullptr, base());
  const std::string pb = store.create(b, &tag, nullptr, nullptr, base());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int seen = 0;
    store.close(a);
    store.close_all([&](void* owner) { seen += owner == &tag; });
    _exit(!a.is_open() && !b.is_open() && seen == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(swtest::exists(pa));
  EXPECT_TRUE(swtest::exists(pb));
  EXPECT_TRUE(store.directory().ready());
  store.close(a);
  EXPECT_FALSE(swtest::exists(pa));
  store.close_all(nullptr);
  EXPECT_FALSE(swtest::exists(pb));
}

}  // namespace

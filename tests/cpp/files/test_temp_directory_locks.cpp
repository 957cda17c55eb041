// sw::TempDirectory's liveness lock and the sweep of dead processes'
// directories (sweep_stale_directories): a directory is removed only when
// its lock file is held by nobody and nothing nested in it is live; never
// one without a lock file, of another name, or behind a link.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "files/temp_directory.hpp"
#include "files_support.hpp"

namespace {

using swtest::exists;
using swtest::touch;
using swtest::wait_exit_code;

// True when some process holds the lock file of directory dir.
bool held(const std::string& dir) {
  const int fd = ::open((dir + "/" + sw::kLockFileName).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

// A directory laid out as a dead process leaves it: a lock file nobody
// holds, and a file.
std::string dead_directory(const std::string& base, const std::string& name) {
  const std::string d = base + "/" + name;
  EXPECT_EQ(::mkdir(d.c_str(), 0700), 0);
  touch(d + "/" + sw::kLockFileName);
  touch(d + "/sw-1-1.bin");
  return d;
}

class TempDirectoryLockTest : public swtest::ScratchDirTest {
 protected:
  const std::string& base_ = dir_;
};

TEST_F(TempDirectoryLockTest, TheOwnerHoldsTheLockUntilItRemovesTheDirectory) {
  sw::TempDirectory d("sw-lock-");
  const std::string p = d.ensure(base_);
  EXPECT_TRUE(exists(p + "/" + sw::kLockFileName));
  EXPECT_TRUE(held(p));
  d.remove();
  EXPECT_FALSE(exists(p));
}

TEST_F(TempDirectoryLockTest, ADeadProcessesDirectoryIsSweptByTheNextOne) {
  // A child creates its directory and files, then dies without cleaning up.
  sw::TempDirectory parent_side("sw-lock-");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    sw::TempDirectory d("sw-lock-");
    const std::string mine = d.ensure(base_);
    touch(mine + "/sw-9-1.bin");
    const ssize_t w = ::write(fds[1], mine.c_str(), mine.size());
    ::_exit(w == static_cast<ssize_t>(mine.size()) ? 0 : 1);  // no remove(): like SIGKILL
  }
  ::close(fds[1]);
  char buf[4096] = {};
  const ssize_t r = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ASSERT_EQ(wait_exit_code(pid), 0);
  ASSERT_GT(r, 0);
  const std::string left(buf, static_cast<size_t>(r));
  ASSERT_TRUE(exists(left + "/sw-9-1.bin"));
  EXPECT_FALSE(held(left));
  // The next process's first directory sweeps it.
  const std::string mine = parent_side.ensure(base_);
  EXPECT_FALSE(exists(left));
  EXPECT_EQ(parent_side.swept(), 1u);
  EXPECT_TRUE(exists(mine));
}

TEST_F(TempDirectoryLockTest, ALockClosedBehindItsBackIsNotClosedAgain) {
  sw::TempDirectory d("sw-lock-");
  const std::string p = d.ensure(base_);
  // Someone closes every descriptor (os.closerange) and opens a file, which
  // gets the lock's number.
  int lock_fd = -1;
  for (int fd = 3; fd < 1024 && lock_fd < 0; ++fd) {
    char target[4096];
    const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof target - 1);
    if (n > 0 && std::string(target, static_cast<size_t>(n)) == p + "/" + sw::kLockFileName) lock_fd = fd;
  }
  if (lock_fd < 0) GTEST_SKIP() << "no /proc/self/fd";
  ::close(lock_fd);
  const std::string other = base_ + "/other.txt";
  touch(other);
  const int reused = ::open(other.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(reused, lock_fd);
  d.remove();
  EXPECT_FALSE(exists(p));
  char c;
  EXPECT_EQ(::read(reused, &c, 1), 1) << "remove() closed a descriptor that was no longer its lock";
  ::close(reused);
}

TEST_F(TempDirectoryLockTest, AProcessSweepsOnce) {
  sw::TempDirectory d("sw-lock-");
  EXPECT_FALSE(d.swept_here());
  const std::string first = dead_directory(base_, "sw-lock-First1");
  d.sweep_once(base_);
  EXPECT_TRUE(d.swept_here());
  EXPECT_FALSE(exists(first));
  const std::string second = dead_directory(base_, "sw-lock-Secnd2");
  d.sweep_once(base_);
  d.ensure(base_);  // creating the directory does not sweep again either
  EXPECT_TRUE(exists(second));
  EXPECT_EQ(d.swept(), 1u);
  const pid_t pid = ::fork();  // a forked child is another process
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (d.swept_here()) ::_exit(2);
    d.sweep_once(base_);
    ::_exit(exists(second) ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(exists(second));
}

TEST_F(TempDirectoryLockTest, TheSweepKeepsLiveUnlockedForeignAndLinkedDirectories) {
  sw::TempDirectory live("sw-lock-");
  const std::string live_dir = live.ensure(base_);
  const std::string dead = dead_directory(base_, "sw-lock-Dead01");
  // No lock file: not a per-process directory of ours (or one being made).
  const std::string unlocked = base_ + "/sw-lock-NoLock";
  ASSERT_EQ(::mkdir(unlocked.c_str(), 0700), 0);
  touch(unlocked + "/data.bin");
  // Another name pattern.
  const std::string other = dead_directory(base_, "sw-lock-toolongname");
  // A link to a dead directory elsewhere is never entered.
  const std::string elsewhere = base_ + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  const std::string target = dead_directory(elsewhere, "sw-lock-Target");
  ASSERT_EQ(::symlink(target.c_str(), (base_ + "/sw-lock-Linked").c_str()), 0);

  EXPECT_EQ(sw::sweep_stale_directories(base_, "sw-lock-"), 1u);
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(live_dir + "/" + sw::kLockFileName));
  EXPECT_TRUE(exists(unlocked + "/data.bin"));
  EXPECT_TRUE(exists(other + "/sw-1-1.bin"));
  EXPECT_TRUE(exists(target + "/sw-1-1.bin"));
  EXPECT_TRUE(exists(base_ + "/sw-lock-Linked"));
}

TEST_F(TempDirectoryLockTest, ADeadDirectoryWithALiveNestedOneIsKept) {
  const std::string dead = dead_directory(base_, "sw-lock-Outer1");
  // A live child's directory nested in it (the lock held here, through
  // another description, as a live process would hold it).
  const std::string nested = dead + "/sw-lock-Inner1";
  ASSERT_EQ(::mkdir(nested.c_str(), 0700), 0);
  touch(nested + "/" + sw::kLockFileName);
  touch(nested + "/child.bin");
  const int lock = ::open((nested + "/" + sw::kLockFileName).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  EXPECT_EQ(sw::sweep_stale_directories(base_, "sw-lock-"), 0u);
  EXPECT_TRUE(exists(nested + "/child.bin"));
  EXPECT_TRUE(exists(dead + "/sw-1-1.bin"));
  // remove_tree (an owner's exit) leaves the live nested directory as well.
  sw::remove_tree(dead);
  EXPECT_TRUE(exists(nested + "/child.bin"));
  EXPECT_FALSE(exists(dead + "/sw-1-1.bin"));
  ::close(lock);  // the child is gone: the next sweep takes everything
  EXPECT_EQ(sw::sweep_stale_directories(base_, "sw-lock-"), 0u);  // the outer lock file went with remove_tree
  sw::remove_tree(dead);
  EXPECT_FALSE(exists(dead));
}

TEST_F(TempDirectoryLockTest, AForkedChildLocksItsOwnAndKeepsItsParentsLock) {
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The "parent" process P: its directory, then a grandchild G that
    // nests its own; P dies without cleaning up while G lives on.
    sw::TempDirectory d("sw-lock-");
    const std::string p_dir = d.ensure(base_);
    const pid_t g = ::fork();
    if (g < 0) ::_exit(2);
    if (g == 0) {
      const std::string g_dir = d.ensure(base_);
      const std::string msg = p_dir + "\n" + g_dir;
      if (::write(ready[1], msg.c_str(), msg.size()) != static_cast<ssize_t>(msg.size())) ::_exit(3);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(4);
      ::_exit(0);  // G dies too, without cleaning up
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ASSERT_EQ(wait_exit_code(pid), 0);  // P is gone
  char buf[8192] = {};
  ssize_t r = ::read(ready[0], buf, sizeof buf - 1);
  ASSERT_GT(r, 0);
  const std::string msg(buf, static_cast<size_t>(r));
  const std::string p_dir = msg.substr(0, msg.find('\n'));
  const std::string g_dir = msg.substr(msg.find('\n') + 1);
  EXPECT_EQ(g_dir.rfind(p_dir + "/", 0), 0u);  // nested
  EXPECT_TRUE(held(p_dir)) << "G keeps the lock it inherited on P's directory";
  EXPECT_TRUE(held(g_dir));
  EXPECT_EQ(sw::sweep_stale_directories(base_, "sw-lock-"), 0u);
  EXPECT_TRUE(exists(g_dir));
  ASSERT_EQ(::write(go[1], "x", 1), 1);  // let G die
  ::close(go[1]);
  r = ::read(ready[0], buf, sizeof buf);  // EOF once G is gone
  EXPECT_EQ(r, 0);
  ::close(ready[0]);
  // G is not our child: wait until the kernel dropped its locks.
  for (int i = 0; i < 2000 && held(p_dir); ++i) ::usleep(1000);
  EXPECT_EQ(sw::sweep_stale_directories(base_, "sw-lock-"), 1u);
  EXPECT_FALSE(exists(p_dir));
}

TEST_F(TempDirectoryLockTest, ASweptDirectoryIsNeverHandedOut) {
  // ensure() creates, locks and checks its directory; a sweep racing with it
  // either finds it locked or removes it before the lock, and then ensure()
  // makes another. Many rounds against a sweeping thread of another process.
  const pid_t sweeper = ::fork();
  ASSERT_GE(sweeper, 0);
  if (sweeper == 0) {
    for (int i = 0; i < 4000; ++i) sw::sweep_stale_directories(base_, "sw-race-");
    ::_exit(0);
  }
  for (int i = 0; i < 300; ++i) {
    sw::TempDirectory d("sw-race-");
    const std::string p = d.ensure(base_);
    touch(p + "/f.bin");
    ASSERT_TRUE(exists(p + "/f.bin")) << "round " << i;
    ASSERT_TRUE(held(p)) << "round " << i;
  }
  EXPECT_EQ(wait_exit_code(sweeper), 0);
}

}  // namespace

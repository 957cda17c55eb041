// The background closer (files/fd_closer.hpp): every descriptor handed over is
// closed, in a burst past the queue bounds too; a forked child (where the
// parent's thread does not exist) closes its copies of the queued
// descriptors and starts a closer of its own.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "files/fd_closer.hpp"

namespace {

int open_null() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

}  // namespace

TEST(FdCloser, ClosesWhatItIsHanded) {
  const int fd = open_null();
  ASSERT_GE(fd, 0);
  sw::close_in_background(fd, 4096);
  sw::wait_background_closes();
  EXPECT_FALSE(fd_open(fd));
}

TEST(FdCloser, IgnoresANegativeDescriptor) {
  sw::close_in_background(-1, 0);
  sw::wait_background_closes();  // returns: nothing was queued
}

TEST(FdCloser, ABurstPastTheBoundsIsClosedEntirely) {
  // More descriptors than the queue holds, and more bytes than it allows:
  // the overflow is closed by the caller, the rest by the closer.
  std::vector<int> fds;
  for (size_t k = 0; k < 3 * sw::kMaxPendingCloses; ++k) {
    const int fd = open_null();
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  const int64_t big = sw::kMaxPendingCloseBytes / 2;
  for (int fd : fds) sw::close_in_background(fd, big);
  sw::wait_background_closes();
  for (int fd : fds) EXPECT_FALSE(fd_open(fd)) << fd;
}

TEST(FdCloser, AForkedChildHasItsOwnCloser) {
  sw::close_in_background(open_null(), 0);  // the parent's closer is running
  sw::wait_background_closes();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child reports by exit code (no gtest assertions after fork).
    const int fd = open_null();
    if (fd < 0) ::_exit(2);
    sw::close_in_background(fd, 4096);
    sw::wait_background_closes();
    ::_exit(fd_open(fd) ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's descriptor was not closed";
}

// The parent's closer sleeps on its condition variable at the fork; that
// thread does not exist in the child, which must still wake its own closer
// round after round (alarm: a lost wake-up fails instead of hanging).
TEST(FdCloser, AForkedChildWakesItsCloserRoundAfterRound) {
  sw::close_in_background(open_null(), 0);
  sw::wait_background_closes();
  ::usleep(20000);  // the parent's closer is asleep on its condition variable now
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    for (int round = 0; round < 200; ++round) {
      const int fd = open_null();
      if (fd < 0) ::_exit(2);
      sw::close_in_background(fd, 4096);
      sw::wait_background_closes();
      if (fd_open(fd)) ::_exit(1);
      if (round % 50 == 0) ::usleep(5000);  // let the closer fall asleep again
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(FdCloser, AForkedChildClosesItsCopiesOfQueuedDescriptors) {
  const int fd = open_null();
  ASSERT_GE(fd, 0);
  sw::hold_background_closes(true);
  sw::close_in_background(fd, 4096);
  ASSERT_TRUE(fd_open(fd)) << "held: the closer must not have taken it";
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fd_open(fd) ? 1 : 0);
  sw::hold_background_closes(false);
  ASSERT_GE(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child kept its copy of a queued descriptor";
  sw::wait_background_closes();
  EXPECT_FALSE(fd_open(fd));
}

TEST(FdCloser, WhileHeldTheBoundSendsTheOverflowBackToTheCaller) {
  std::vector<int> fds;
  for (size_t k = 0; k < sw::kMaxPendingCloses + 8; ++k) {
    const int fd = open_null();
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  sw::hold_background_closes(true);
  for (int fd : fds) sw::close_in_background(fd, 0);
  size_t still_open = 0;
  for (int fd : fds) still_open += fd_open(fd) ? 1 : 0;
  sw::hold_background_closes(false);
  EXPECT_EQ(still_open, sw::kMaxPendingCloses) << "the queue holds exactly its bound; the rest closed inline";
  sw::wait_background_closes();
  for (int fd : fds) EXPECT_FALSE(fd_open(fd)) << fd;
}

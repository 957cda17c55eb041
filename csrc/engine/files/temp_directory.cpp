#include "files/temp_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

namespace sw {

namespace {

// Nesting bound for every walk (against pathological trees).
constexpr int kMaxDepth = 32;

bool is_directory(const std::string& p) {
  struct stat st;
  return !p.empty() && ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The lock of the directory open as dfd: Absent (no lock file: not a
// per-process directory, or one still being created), Held (a live process
// holds it, or it cannot be probed: counted as live), Free (its process is
// gone; *locked is then a descriptor holding the lock, which the caller
// closes once done with the directory).
enum class LockState { Absent, Held, Free };

LockState probe_lock(int dfd, int* locked) {
  const int lfd = ::openat(dfd, kLockFileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (lfd < 0) return errno == ENOENT ? LockState::Absent : LockState::Held;
  if (::flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lfd);
    return LockState::Held;
  }
  *locked = lfd;
  return LockState::Free;
}

// Names in the open directory dfd, "." and ".." left out.
std::vector<std::string> entries(int dfd) {
  std::vector<std::string> names;
  const int own = ::dup(dfd);  // closedir closes the descriptor it was given
  if (own < 0) return names;
  DIR* d = ::fdopendir(own);
  if (!d) {
    ::close(own);
    return names;
  }
  ::rewinddir(d);  // the duplicate shares dfd's position: an earlier walk left it at the end
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  return names;
}

// The subdirectory name of dfd, opened without following a link; -1 when
// it is not one.
int open_subdirectory(int dfd, const std::string& name) {
  return ::openat(dfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// True when some directory below dfd holds a lock a live process holds.
bool has_live_nested(int dfd, int depth) {
  if (depth <= 0) return true;  // too deep to tell: counted as live
  for (const std::string& n : entries(dfd)) {
    const int sub = open_subdirectory(dfd, n);
    if (sub < 0) continue;
    int locked = -1;
    bool live = probe_lock(sub, &locked) == LockState::Held || has_live_nested(sub, depth - 1);
    if (locked >= 0) ::close(locked);
    ::close(sub);
    if (live) return true;
  }
  return false;
}

// Removes every entry of the open directory fd (recursively) except nested
// directories a live process holds the lock of, then closes fd.
void clear_dir(int fd, int depth) {
  for (const std::string& n : entries(fd)) {
    if (::unlinkat(fd, n.c_str(), 0) == 0) continue;
    if ((errno != EISDIR && errno != EPERM) || depth <= 0) continue;
    const int sub = open_subdirectory(fd, n);
    if (sub < 0) continue;
    int locked = -1;
    if (probe_lock(sub, &locked) == LockState::Held) {
      ::close(sub);  // a live child's directory: it removes it itself
      continue;
    }
    clear_dir(sub, depth - 1);
    ::unlinkat(fd, n.c_str(), AT_REMOVEDIR);
    if (locked >= 0) ::close(locked);
  }
  ::close(fd);
}

// mkdtemp's pattern: prefix followed by six letters or digits.
bool generated_name(const std::string& name, const std::string& prefix) {
  if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

}  // namespace

void remove_tree(const std::string& path) noexcept {
  if (path.empty()) return;
  if (::unlink(path.c_str()) == 0) return;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  try {
    clear_dir(fd, kMaxDepth);
  } catch (...) {  // std::bad_alloc from a name list: best effort
  }
  ::rmdir(path.c_str());
}

size_t sweep_stale_directories(const std::string& base, const std::string& prefix) noexcept {
  const int bfd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (bfd < 0) return 0;
  size_t removed = 0;
  try {
    for (const std::string& n : entries(bfd)) {
      if (!generated_name(n, prefix)) continue;
      const int dfd = open_subdirectory(bfd, n);
      if (dfd < 0) continue;
      struct stat st;
      int locked = -1;
      if (::fstat(dfd, &st) != 0 || st.st_uid != ::geteuid() || probe_lock(dfd, &locked) != LockState::Free) {
        ::close(dfd);
        continue;
      }
      // Holding the dead process's lock: a process creating a directory of
      // that name cannot lock it now and picks another one.
      if (has_live_nested(dfd, kMaxDepth)) {
        ::close(dfd);
      } else {
        clear_dir(dfd, kMaxDepth);
        if (::unlinkat(bfd, n.c_str(), AT_REMOVEDIR) == 0) ++removed;
      }
      ::close(locked);
    }
  } catch (...) {  // std::bad_alloc from a name list: best effort
  }
  ::close(bfd);
  return removed;
}

bool TempDirectory::owned() const { return !path_.empty() && pid_ == ::getpid(); }

bool TempDirectory::ready() const { return owned() && is_directory(path_); }

const std::string& TempDirectory::ensure(const std::string& base) {
  if (ready()) return path_;
  const pid_t me = ::getpid();
  // A forked child nests inside its parent's directory while that exists.
  std::string parent = base;
  const bool nested = !path_.empty() && pid_ != me && is_directory(path_);
  if (nested) parent = path_;
  if (parent.empty()) throw std::system_error(ENOENT, std::generic_category(), "no base directory");
  if (lock_fd_ >= 0) {
    if (pid_ == me) {
      close_lock();  // the lock of this process's vanished directory
    } else {
      inherited_locks_.push_back(lock_fd_);  // the parent's: kept (fork rule)
      lock_fd_ = -1;
    }
  }
  if (!nested) sweep_once(parent);
  const std::string tmpl = parent + "/" + prefix_ + "XXXXXX";
  for (int attempt = 0;; ++attempt) {
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      const int err = errno;
      throw std::system_error(err, std::generic_category(), "cannot create a temporary directory in " + parent);
    }
    const std::string dir = buf.data();
    const std::string lock = dir + "/" + kLockFileName;
    const int lfd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lfd < 0) {
      const int err = errno;
      ::rmdir(dir.c_str());
      // ENOENT: a sweeper took the fresh, still unlocked directory.
      if (err == ENOENT && attempt < 100) continue;
      throw std::system_error(err, std::generic_category(), "cannot create " + lock);
    }
    // A sweeper may have locked the file between its creation and here
    // (the directory is then going), or removed it already (no links left).
    struct stat st;
    if (::flock(lfd, LOCK_EX | LOCK_NB) != 0 || ::fstat(lfd, &st) != 0 || st.st_nlink == 0) {
      ::close(lfd);
      if (attempt < 100) continue;
      throw std::system_error(EAGAIN, std::generic_category(), "cannot lock " + lock);
    }
    path_ = dir;
    pid_ = me;
    lock_fd_ = lfd;
    lock_dev_ = st.st_dev;
    lock_ino_ = st.st_ino;
    return path_;
  }
}

void TempDirectory::close_lock() noexcept {
  if (lock_fd_ < 0) return;
  // Closed only while the number still names our lock file: code that closed
  // it behind our back (os.closerange) may have reused the number since.
  struct stat st;
  if (::fstat(lock_fd_, &st) == 0 && st.st_dev == lock_dev_ && st.st_ino == lock_ino_) ::close(lock_fd_);
  lock_fd_ = -1;
}

bool TempDirectory::swept_here() const { return swept_pid_ == ::getpid(); }

void TempDirectory::sweep_once(const std::string& base) noexcept {
  if (swept_here()) return;
  swept_pid_ = ::getpid();
  swept_ += sweep_stale_directories(base, prefix_);
}

void TempDirectory::remove() noexcept {
  if (owned()) {
    remove_tree(path_);
    close_lock();  // the lock goes with the directory
  } else if (lock_fd_ >= 0) {
    // A forked child forgetting its parent's directory keeps the parent's
    // lock (fork rule); if the list cannot grow, the descriptor just stays
    // open unrecorded, which keeps the lock all the same.
    try {
      inherited_locks_.push_back(lock_fd_);
    } catch (...) {
    }
    lock_fd_ = -1;
  }
  path_.clear();
  pid_ = 0;
}

}  // namespace sw

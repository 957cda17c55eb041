// The per-process temporary directory FileBacked keeps its files in.
//
// Rules:
// - Created lazily (mkdtemp, mode 0700) on first use, under a base directory
//   the caller names (the binding passes tempfile.gettempdir(), so TMPDIR is
//   honoured).
// - Re-created on the next use when it vanished (someone removed it), so one
//   deleted directory does not break every later file of the process.
// - Liveness lock: the directory holds a lock file (kLockFileName) that its
//   process keeps flock()ed from creation until it removes the directory.
//   The kernel drops the lock however the process ends (SIGKILL included),
//   so a directory whose lock nobody holds belongs to a process that is
//   gone. A lock file is created and locked before anything else goes into
//   the directory.
// - Fork rule: the directory belongs to the process that created it. A forked
//   child never uses or removes its parent's directory; it creates its own,
//   inside the parent's when that still exists, so a child that dies without
//   cleaning up (a multiprocessing worker killed by Pool.terminate) leaves
//   nothing behind once the parent's directory is swept. The child keeps
//   the descriptor on its parent's lock it inherited (never closes it), so
//   the parent's directory, which holds the child's, counts as live while
//   any process of the family lives.
// - remove() deletes the directory recursively (files, nested children's
//   directories whose process is gone; symbolic links are removed, never
//   followed), only in the owning process. A nested directory whose lock is
//   still held (a live child) is left in place.
// - The sweep: when a process creates its directory directly under the base
//   (not nested in a parent's), it first removes the directories of dead
//   processes there (sweep_stale_directories), once per process
//   (sweep_once() runs the same sweep without creating a directory).
// Not thread-safe: the caller serialises (FileStore holds its lock).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace sw {

// The lock file inside every per-process directory.
inline constexpr const char* kLockFileName = ".lock";

class TempDirectory {
 public:
  explicit TempDirectory(std::string prefix = "strideweave-") : prefix_(std::move(prefix)) {}
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  // Sweeps the directory if this process owns it (last-resort cleanup).
  ~TempDirectory() { remove(); }

  // True when this process owns a directory that still exists; then path()
  // is the directory to use without calling ensure().
  bool ready() const;
  // The directory of this process, creating it under base when it has none
  // (first use, after a fork, after remove()) or it vanished. A forked child
  // nests its directory inside the parent's when that exists (base is then
  // unused). Creating one directly under base sweeps base first (once per
  // process). Throws std::system_error (ENOENT when base is missing, ...).
  const std::string& ensure(const std::string& base);
  // The current directory ("" before ensure() or after remove()); in a
  // forked child, before its own ensure(), the parent's.
  const std::string& path() const { return path_; }
  // True when the directory was created by this process.
  bool owned() const;
  // Removes the directory and everything in it when this process owns it
  // (best effort, never throws; live children's nested directories stay),
  // then drops its lock, and forgets it. A forked child forgets its
  // parent's directory without touching it.
  void remove() noexcept;
  // The sweep of base, once per process (ensure() runs it before creating a
  // directory directly under base; a caller may run it earlier). Never
  // throws.
  void sweep_once(const std::string& base) noexcept;
  // True once this process swept.
  bool swept_here() const;
  // Directories of dead processes removed by this object's sweeps (tests).
  size_t swept() const { return swept_; }

 private:
  std::string prefix_;
  std::string path_;
  pid_t pid_ = 0;
  int lock_fd_ = -1;               // this process's lock on path_ (-1: none)
  dev_t lock_dev_ = 0;             // the lock file's identity: a descriptor number
  ino_t lock_ino_ = 0;             // closed behind our back is never closed again
  void close_lock() noexcept;
  std::vector<int> inherited_locks_;  // ancestors' locks, kept open (fork rule)
  pid_t swept_pid_ = 0;            // the process that last swept the base
  size_t swept_ = 0;
};

// Removes path and, for a directory, everything below it, without following
// symbolic links (best effort, never throws). Nested directories whose lock
// file is held by a live process are left in place (and so is path then).
// Exposed for tests.
void remove_tree(const std::string& path) noexcept;

// Removes every directory directly under base named prefix followed by six
// characters (mkdtemp's pattern) that belongs to this user, holds a lock
// file no process holds, and has no live nested directory. Anything else
// (no lock file, a held lock, another owner, a symbolic link, another name)
// is left alone. Returns how many directories were removed; never throws.
size_t sweep_stale_directories(const std::string& base, const std::string& prefix) noexcept;

}  // namespace sw

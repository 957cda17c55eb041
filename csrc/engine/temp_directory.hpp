// The per-process temporary directory FileBacked keeps its files in.
//
// Rules:
// - Created lazily (mkdtemp, mode 0700) on first use, under a base directory
//   the caller names (the binding passes tempfile.gettempdir(), so TMPDIR is
//   honoured).
// - Re-created on the next use when it vanished (someone removed it), so one
//   deleted directory does not break every later file of the process.
// - Fork rule: the directory belongs to the process that created it. A forked
//   child never uses or removes its parent's directory; it creates its own,
//   inside the parent's when that still exists, so a child that dies without
//   cleaning up (a multiprocessing worker killed by Pool.terminate) leaves
//   nothing behind once the parent's directory is swept.
// - remove() deletes the directory recursively (files, nested children's
//   directories; symbolic links are removed, never followed), only in the
//   owning process.
// Not thread-safe: the binding calls it with the GIL held.
#pragma once
#include <sys/types.h>

#include <string>

namespace sw {

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
  // unused). Throws std::system_error (ENOENT when base is missing, ...).
  const std::string& ensure(const std::string& base);
  // The current directory ("" before ensure() or after remove()); in a
  // forked child, before its own ensure(), the parent's.
  const std::string& path() const { return path_; }
  // True when the directory was created by this process.
  bool owned() const;
  // Removes the directory and everything in it when this process owns it
  // (best effort, never throws), and forgets it. A forked child forgets its
  // parent's directory without touching it.
  void remove() noexcept;

 private:
  std::string prefix_;
  std::string path_;
  pid_t pid_ = 0;
};

// Removes path and, for a directory, everything below it, without following
// symbolic links (best effort, never throws). Exposed for tests.
void remove_tree(const std::string& path) noexcept;

}  // namespace sw

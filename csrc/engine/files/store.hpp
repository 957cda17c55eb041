// The file store behind FileBacked: where its temporary files are created,
// what they are called, which of them are live, who may remove them, and
// how one becomes private to a process after a fork.
//
// Rules:
// - A file lives in a directory the caller names (an existing directory,
//   made absolute so a later chdir() cannot redirect the unlink) or in the
//   per-process TempDirectory, created under a base directory the caller
//   supplies lazily (the binding asks tempfile.gettempdir() only when needed;
//   the last base is kept for copies made on worker threads).
// - A caller-chosen name is a plain name: not empty, not "." or "..", no '/'.
//   Otherwise the store generates "sw-<pid>-<n>.bin", skipping names that
//   already exist (a user may have taken one).
// - When the per-process directory vanished between its check and the
//   file's creation, it is re-created once.
// - Fork rule: a file is removed (on close and at exit) only by the process
//   that created it (or made its private copy); a forked child that
//   inherited it closes its descriptor and leaves the file in place.
// - Copy on write across fork: a live file is private to one process. The
//   first write after a fork, in whichever process writes, makes a copy
//   first (copy_file_data: a reflink where the file system has them) and
//   swaps it in under the same descriptor number. The process that created
//   the file keeps its name (the copy is renamed over it; the other
//   processes keep the old inode open); another process puts its copy, under
//   the same name where free, in its own per-process directory (or in the
//   caller's directory for a file created there).
// - Locking: the store's own lock is held only briefly (never across a
//   Python call nor a copy); a storage's lock is taken before the store's,
//   never after. Both are made safe across fork() (pthread_atfork).
// Thread-safe; create() must not be called with a lock a base() call needs.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>

#include "files/file_storage.hpp"
#include "files/temp_directory.hpp"

namespace sw {

// A failed file-system step, with the path it concerned (the binding raises
// OSError(errno, ..., filename=path)).
class PathError : public std::system_error {
 public:
  PathError(int err, std::string path)
      : std::system_error(err, std::generic_category(), path), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Why a caller-chosen file name is refused.
enum class FileNameProblem { None, Invalid, HasDirectoryParts };
FileNameProblem check_file_name(const std::string& name);

// An existing directory as an absolute path. Throws std::invalid_argument
// for "", PathError(errno of stat / getcwd, dir) when it cannot be used and
// PathError(ENOTDIR, dir) when it is not a directory.
std::string resolve_directory(const std::string& dir);

// path made absolute against the current directory (no normalisation, no
// link resolution). Throws PathError(errno of getcwd, path).
std::string absolute_path(const std::string& path);

// The directory part of a file path (everything before the last '/'; "" when
// there is none).
std::string parent_directory(const std::string& path);

// Bytes of n slots of item bytes. Throws std::overflow_error("FileBacked size
// too large") when that does not fit a file offset, std::invalid_argument for
// a negative n or a non-positive item.
int64_t file_slot_bytes(int64_t n, int item);

// The region FileBacked.open uses in a user's file: slot 0 at byte base,
// slots slots.
struct FileRegion {
  int64_t base;
  int64_t slots;
};
// Checks FileBacked.open's offset and slots (none: "the rest of the file")
// before the file is touched: throws std::invalid_argument for a negative
// value or an offset that is not a multiple of item (every slot access is
// then item-aligned in the file, as in a NumPy memmap).
void check_region_arguments(int64_t offset, std::optional<int64_t> slots, int item);
// The region of a file of file_bytes bytes that offset and slots select
// (arguments as above; no slots takes everything after offset, which must
// be a whole number of slots). Throws std::invalid_argument naming path,
// the sizes and the fix: an offset past the end, a file too short for the
// slots, a rest that is not a whole number of slots.
FileRegion plan_file_region(const std::string& path, int64_t file_bytes, int64_t offset,
                            std::optional<int64_t> slots, int item);

class FileStore final : public FileUnsharer {
 public:
  // Supplies the base directory for the per-process directory. May throw;
  // whatever it throws reaches the caller of create() / prepare_fork().
  using BaseFn = std::function<std::string()>;

  explicit FileStore(std::string prefix = "strideweave-");
  ~FileStore();
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  // Creates file (which must be closed) as name in directory: a generated
  // name when name is null, the per-process directory when directory is
  // null. Registers it as a live file of this process, tagged with owner
  // (handed back by close_all), and makes this store its unsharer. Returns
  // the file's path. Throws PathError naming the path tried (or the base
  // directory when the per-process directory cannot be created), and
  // whatever base() throws.
  std::string create(FileStorage& file, void* owner, const std::string* name, const std::string* directory,
                     const BaseFn& base);
  // Closes file and forgets it. The file is removed unless it is live and
  // was created by another process (a forked child's inherited copy).
  void close(FileStorage& file) noexcept;
  // Exit cleanup: closes every live file as close() does, calls
  // on_closed(owner) for each, and removes this process's directory.
  // Idempotent.
  void close_all(const std::function<void(void*)>& on_closed) noexcept;
  // The sweep of dead processes' directories under the base (once per
  // process; creating the per-process directory runs it too). For the
  // FileBacked creations that need no per-process directory (a caller's
  // directory, a user's file). base() is called only when this process has
  // not swept yet; whatever it throws reaches the caller.
  void sweep_once(const BaseFn& base);
  // Before a fork: makes sure this process has its directory, so a child's
  // directory nests inside it. Throws as create() does.
  void prepare_fork(const BaseFn& base);
  // True once per process: the first call in each process (the importing one
  // after mark_exit_hooked(), or a forked child) says its exit hook is
  // still to be installed.
  bool needs_exit_hook();
  void mark_exit_hooked();
  // FileUnsharer: gives this process a private copy of the live file f
  // (see the copy-on-write rule above); a no-op when f already is private
  // or is not live here. Called by FileStorage before a write, on any
  // thread. Throws PathError / std::system_error; f is unchanged then.
  void unshare(FileStorage& f) override;

  // Live files (tests, diagnostics).
  size_t live_count() const;
  const TempDirectory& directory() const { return dir_; }

 private:
  struct Live {
    void* owner;
    pid_t pid;             // the process whose file this is (it removes it)
    bool user_directory;   // created in a directory the caller named
  };
  // The per-process directory; m_ held. base_fn is called only when the
  // directory must be created and no base is known yet.
  const std::string& directory_locked(const BaseFn* base_fn);
  std::string generated_name();
  static void fork_prepare();
  static void fork_parent();
  static void fork_child();

  mutable std::mutex m_;
  TempDirectory dir_;
  std::string base_;  // the last base directory base() gave
  std::unordered_map<FileStorage*, Live> live_;
  unsigned long long counter_ = 0;
  pid_t exit_hooked_pid_ = 0;
};

}  // namespace sw

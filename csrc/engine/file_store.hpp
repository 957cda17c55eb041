// The file store behind FileBacked: where its files are created, what they
// are called, which of them are live, and who may remove them.
//
// Rules:
// - A file lives in a directory the caller names (an existing directory,
//   made absolute so a later chdir() cannot redirect the unlink) or in the
//   per-process TempDirectory, created under a base directory the caller
//   supplies lazily (the binding asks tempfile.gettempdir() only when needed).
// - A caller-chosen name is a plain name: not empty, not "." or "..", no '/'.
//   Otherwise the store generates "sw-<pid>-<n>.bin", skipping names that
//   already exist (a user may have taken one).
// - When the per-process directory vanished between its check and the
//   file's creation, it is re-created once.
// - Fork rule: a file is removed (on close and at exit) only by the process
//   that created it; a forked child that inherited it closes its descriptor
//   and leaves the file in place.
// Not thread-safe: the binding calls it with the GIL held.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
#include <unordered_map>

#include "storage.hpp"
#include "temp_directory.hpp"

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

// The directory part of a file path (everything before the last '/'; "" when
// there is none).
std::string parent_directory(const std::string& path);

// Bytes of n slots of item bytes. Throws std::overflow_error("FileBacked size
// too large") when that does not fit a file offset, std::invalid_argument for
// a negative n or a non-positive item.
int64_t file_slot_bytes(int64_t n, int item);

class FileStore {
 public:
  // Supplies the base directory for the per-process directory. May throw;
  // whatever it throws reaches the caller of create() / prepare_fork().
  using BaseFn = std::function<std::string()>;

  explicit FileStore(std::string prefix = "strideweave-") : dir_(std::move(prefix)) {}
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  // Creates file (which must be closed) as name in directory: a generated
  // name when name is null, the per-process directory when directory is
  // null. Registers it as a live file of this process, tagged with owner
  // (handed back by close_all). Returns the file's path. Throws PathError
  // naming the path tried (or the base directory when the per-process
  // directory cannot be created), and whatever base() throws.
  std::string create(FileStorage& file, void* owner, const std::string* name, const std::string* directory,
                     const BaseFn& base);
  // Closes file and forgets it. The file is removed unless it is live and
  // was created by another process (a forked child's inherited copy).
  void close(FileStorage& file) noexcept;
  // Exit cleanup: closes every live file as close() does, calls
  // on_closed(owner) for each, and removes this process's directory.
  // Idempotent.
  void close_all(const std::function<void(void*)>& on_closed) noexcept;
  // Before a fork: makes sure this process has its directory, so a child's
  // directory nests inside it. Throws as create() does.
  void prepare_fork(const BaseFn& base);
  // True once per process: the first call in each process (the importing one
  // after mark_exit_hooked(), or a forked child) says its exit hook is
  // still to be installed.
  bool needs_exit_hook();
  void mark_exit_hooked();

  // Live files (tests, diagnostics).
  size_t live_count() const { return live_.size(); }
  const TempDirectory& directory() const { return dir_; }

 private:
  struct Live {
    void* owner;
    pid_t pid;  // the process that created the file
  };
  const std::string& per_process_directory(const BaseFn& base);
  std::string generated_name();

  TempDirectory dir_;
  std::unordered_map<FileStorage*, Live> live_;
  unsigned long long counter_ = 0;
  pid_t exit_hooked_pid_ = 0;
};

}  // namespace sw

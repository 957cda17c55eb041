#include "file_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <stdexcept>
#include <vector>

namespace sw {

FileNameProblem check_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('\0') != std::string::npos)
    return FileNameProblem::Invalid;
  if (name.find('/') != std::string::npos) return FileNameProblem::HasDirectoryParts;
  return FileNameProblem::None;
}

std::string resolve_directory(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("FileBacked directory must not be empty");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw PathError(errno, dir);
  if (!S_ISDIR(st.st_mode)) throw PathError(ENOTDIR, dir);
  if (dir[0] == '/') return dir;
  std::vector<char> cwd(4096);
  while (!::getcwd(cwd.data(), cwd.size())) {
    if (errno != ERANGE || cwd.size() > (1u << 20)) throw PathError(errno, dir);
    cwd.resize(cwd.size() * 2);
  }
  return std::string(cwd.data()) + "/" + dir;
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

int64_t file_slot_bytes(int64_t n, int item) {
  if (n < 0 || item <= 0) throw std::invalid_argument("FileBacked size must be non-negative");
  if (n > std::numeric_limits<int64_t>::max() / item) throw std::overflow_error("FileBacked size too large");
  return n * item;
}

const std::string& FileStore::per_process_directory(const BaseFn& base) {
  if (dir_.ready()) return dir_.path();
  const std::string b = base();
  try {
    return dir_.ensure(b);
  } catch (const std::system_error& e) {
    throw PathError(e.code().value(), b);
  }
}

std::string FileStore::generated_name() {
  return "sw-" + std::to_string(static_cast<long long>(::getpid())) + "-" + std::to_string(++counter_) + ".bin";
}

std::string FileStore::create(FileStorage& file, void* owner, const std::string* name, const std::string* directory,
                              const BaseFn& base) {
  std::string path;
  bool retried = false;
  for (int attempt = 0;; ++attempt) {
    const std::string& dir = directory ? *directory : per_process_directory(base);
    path = dir + "/" + (name ? *name : generated_name());
    try {
      file.create(path);
      break;
    } catch (const std::system_error& e) {
      const int err = e.code().value();
      // A generated name may collide with a user-chosen one: try the next.
      if (!name && err == EEXIST && attempt < 1000) continue;
      // The per-process directory vanished since it was checked: once more.
      if (!directory && err == ENOENT && !retried) {
        retried = true;
        continue;
      }
      throw PathError(err, path);
    }
  }
  try {
    live_[&file] = Live{owner, ::getpid()};
  } catch (...) {
    file.close_and_unlink();
    throw;
  }
  return path;
}

void FileStore::close(FileStorage& file) noexcept {
  auto it = live_.find(&file);
  if (it != live_.end() && it->second.pid != ::getpid())
    file.close_keep_file();
  else
    file.close_and_unlink();
  if (it != live_.end()) live_.erase(it);
}

void FileStore::close_all(const std::function<void(void*)>& on_closed) noexcept {
  const pid_t pid = ::getpid();
  for (auto& [file, live] : live_) {
    if (live.pid == pid)
      file->close_and_unlink();
    else
      file->close_keep_file();  // a forked child's copy of its parent's file
    if (on_closed) on_closed(live.owner);
  }
  live_.clear();
  dir_.remove();  // only when this process owns it
}

void FileStore::prepare_fork(const BaseFn& base) {
  if (!dir_.ready()) per_process_directory(base);
}

bool FileStore::needs_exit_hook() {
  const pid_t pid = ::getpid();
  if (exit_hooked_pid_ == pid) return false;
  exit_hooked_pid_ = pid;
  return true;
}

void FileStore::mark_exit_hooked() { exit_hooked_pid_ = ::getpid(); }

}  // namespace sw

#include "files/store.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "files/io.hpp"

namespace sw {

FileNameProblem check_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('\0') != std::string::npos)
    return FileNameProblem::Invalid;
  if (name.find('/') != std::string::npos) return FileNameProblem::HasDirectoryParts;
  return FileNameProblem::None;
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  std::vector<char> cwd(4096);
  while (!::getcwd(cwd.data(), cwd.size())) {
    if (errno != ERANGE || cwd.size() > (1u << 20)) throw PathError(errno, path);
    cwd.resize(cwd.size() * 2);
  }
  return std::string(cwd.data()) + "/" + path;
}

std::string resolve_directory(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("FileBacked directory must not be empty");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw PathError(errno, dir);
  if (!S_ISDIR(st.st_mode)) throw PathError(ENOTDIR, dir);
  return absolute_path(dir);
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

void check_region_arguments(int64_t offset, std::optional<int64_t> slots, int item) {
  if (item <= 0) throw std::invalid_argument("FileBacked.open: invalid item size");
  if (offset < 0)
    throw std::invalid_argument("FileBacked.open offset must be non-negative, not " + std::to_string(offset));
  if (slots && *slots < 0)
    throw std::invalid_argument("FileBacked.open slots must be non-negative or None, not " + std::to_string(*slots));
  if (offset % item != 0)
    throw std::invalid_argument("FileBacked.open offset " + std::to_string(offset) +
                                " is misaligned: it must be a multiple of the item size (" + std::to_string(item) +
                                " bytes)");
}

FileRegion plan_file_region(const std::string& path, int64_t file_bytes, int64_t offset,
                            std::optional<int64_t> slots, int item) {
  check_region_arguments(offset, slots, item);
  const std::string where = "'" + path + "' (" + std::to_string(file_bytes) + " bytes)";
  if (offset > file_bytes)
    throw std::invalid_argument("FileBacked.open offset " + std::to_string(offset) + " is past the end of " + where);
  const int64_t rest = file_bytes - offset;
  if (!slots) {
    if (rest % item != 0)
      throw std::invalid_argument("FileBacked.open: the " + std::to_string(rest) + " bytes of " + where +
                                  " after offset " + std::to_string(offset) + " are not a whole number of " +
                                  std::to_string(item) + "-byte slots; pass slots=");
    return FileRegion{offset, rest / item};
  }
  if (*slots > rest / item)
    throw std::invalid_argument("FileBacked.open: the file is too short: " + std::to_string(*slots) + " slots of " +
                                std::to_string(item) + " bytes from offset " + std::to_string(offset) +
                                " end past the end of " + where);
  return FileRegion{offset, *slots};
}

// ------------------------------------------------------------ fork safety

namespace {

// Every store of the process, for the fork handlers. Never destroyed: a
// store may be destroyed during static destruction.
struct Stores {
  std::mutex m;
  std::vector<FileStore*> all;
};

Stores& stores() {
  static Stores* s = new Stores;
  return *s;
}

}  // namespace

// Before fork: every store's lock, so the child gets consistent tables
// (only ever held briefly, never across a copy or a Python call).
void FileStore::fork_prepare() {
  Stores& s = stores();
  s.m.lock();
  for (FileStore* st : s.all) st->m_.lock();
}

void FileStore::fork_parent() {
  Stores& s = stores();
  for (FileStore* st : s.all) st->m_.unlock();
  s.m.unlock();
}

// In the child, the one thread left: a storage lock that a thread of the
// parent held through the fork (a copy in progress) would stay locked for
// good, so every live storage's lock starts afresh (the child's copy of
// that storage is made private again on its first write).
void FileStore::fork_child() {
  Stores& s = stores();
  for (FileStore* st : s.all) {
    for (auto& entry : st->live_) new (&entry.first->m_) std::mutex;
    st->m_.unlock();
  }
  s.m.unlock();
}

FileStore::FileStore(std::string prefix) : dir_(std::move(prefix)) {
  static const bool registered = [] {
    pthread_atfork(&FileStore::fork_prepare, &FileStore::fork_parent, &FileStore::fork_child);
    return true;
  }();
  (void)registered;
  fork_epoch();  // registers the generation counter before any fork
  Stores& s = stores();
  std::lock_guard<std::mutex> lk(s.m);
  s.all.push_back(this);
}

FileStore::~FileStore() {
  Stores& s = stores();
  std::lock_guard<std::mutex> lk(s.m);
  s.all.erase(std::remove(s.all.begin(), s.all.end(), this), s.all.end());
  // Live storages must not call back into a destroyed store.
  for (auto& entry : live_) entry.first->set_unsharer(nullptr);
}

// ------------------------------------------------------------ files

const std::string& FileStore::directory_locked(const BaseFn* base_fn) {
  if (dir_.ready()) return dir_.path();
  if (base_fn) base_ = (*base_fn)();
  try {
    return dir_.ensure(base_);
  } catch (const std::system_error& e) {
    throw PathError(e.code().value(), base_);
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
    bool need_base = false;
    {
      std::lock_guard<std::mutex> lk(m_);
      if (directory) {
        path = *directory;
      } else if (dir_.ready()) {
        path = dir_.path();
      } else {
        need_base = true;
      }
      if (!need_base) path += "/" + (name ? *name : generated_name());
    }
    if (need_base) {
      // base() may run Python code, which may switch threads: it is asked
      // for outside the lock, and only when the directory must be made.
      std::string b = base();
      std::lock_guard<std::mutex> lk(m_);
      base_ = std::move(b);
      path = directory_locked(nullptr) + "/" + (name ? *name : generated_name());
    }
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
    std::lock_guard<std::mutex> lk(m_);
    live_[&file] = Live{owner, ::getpid(), directory != nullptr};
  } catch (...) {
    file.close_and_unlink();
    throw;
  }
  file.set_unsharer(this);
  return path;
}

void FileStore::close(FileStorage& file) noexcept {
  bool inherited = false;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = live_.find(&file);
    if (it != live_.end()) {
      inherited = it->second.pid != ::getpid();
      live_.erase(it);
    }
  }
  if (inherited)
    file.close_keep_file();
  else
    file.close_and_unlink();
}

void FileStore::close_all(const std::function<void(void*)>& on_closed) noexcept {
  const pid_t pid = ::getpid();
  std::unordered_map<FileStorage*, Live> files;
  {
    std::lock_guard<std::mutex> lk(m_);
    files.swap(live_);
  }
  for (auto& [file, live] : files) {
    if (live.pid == pid)
      file->close_and_unlink();
    else
      file->close_keep_file();  // a forked child's copy of its parent's file
    if (on_closed) on_closed(live.owner);
  }
  std::lock_guard<std::mutex> lk(m_);
  dir_.remove();  // only when this process owns it
}

void FileStore::sweep_once(const BaseFn& base) {
  {
    std::lock_guard<std::mutex> lk(m_);
    if (dir_.swept_here()) return;
  }
  std::string b = base();  // outside the lock, as in create()
  std::lock_guard<std::mutex> lk(m_);
  dir_.sweep_once(b);
}

void FileStore::prepare_fork(const BaseFn& base) {
  {
    std::lock_guard<std::mutex> lk(m_);
    if (dir_.ready()) return;
  }
  std::string b = base();
  std::lock_guard<std::mutex> lk(m_);
  base_ = std::move(b);
  directory_locked(nullptr);
}

bool FileStore::needs_exit_hook() {
  std::lock_guard<std::mutex> lk(m_);
  const pid_t pid = ::getpid();
  if (exit_hooked_pid_ == pid) return false;
  exit_hooked_pid_ = pid;
  return true;
}

void FileStore::mark_exit_hooked() {
  std::lock_guard<std::mutex> lk(m_);
  exit_hooked_pid_ = ::getpid();
}

size_t FileStore::live_count() const {
  std::lock_guard<std::mutex> lk(m_);
  return live_.size();
}

// ------------------------------------------------------------ copy on write

namespace {

int create_exclusive(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void FileStore::unshare(FileStorage& f) {
  std::lock_guard<std::mutex> fl(f.m_);
  const uint64_t now = fork_epoch();
  if (f.epoch_.load(std::memory_order_acquire) == now) return;  // another thread did it
  if (f.fd_ < 0) throw std::system_error(EBADF, std::generic_category(), "file storage is not open");
  const pid_t me = ::getpid();
  const std::string old_path = f.path_;
  const std::string name = base_name(old_path);
  // Where the copy goes, under which name: the creator writes a hidden
  // name beside its file and renames it over the file; another process
  // takes the same name in its own directory when it is free.
  bool creator;
  std::string dir, fallback_dir, first_name, second_name;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = live_.find(&f);
    if (it == live_.end()) {  // not this store's (closed meanwhile)
      f.epoch_.store(now, std::memory_order_release);
      return;
    }
    creator = it->second.pid == me;
    if (creator || it->second.user_directory) {
      dir = parent_directory(old_path);
    } else {
      dir = directory_locked(nullptr);
    }
    if (!it->second.user_directory) {
      try {
        fallback_dir = directory_locked(nullptr);  // this process's own
      } catch (const std::system_error&) {
      }
    }
    first_name = creator ? "." + name + ".copy-" + generated_name() : name;
    second_name = generated_name();
  }
  std::string path = dir + "/" + first_name;
  int fd = create_exclusive(path);
  if (fd < 0 && errno == EEXIST) {
    path = dir + "/" + second_name;
    fd = create_exclusive(path);
  }
  if (fd < 0 && errno == ENOENT && !fallback_dir.empty() && fallback_dir != dir) {
    // The creator's directory vanished: the copy goes to a fresh one.
    creator = false;
    path = fallback_dir + "/" + second_name;
    fd = create_exclusive(path);
  }
  if (fd < 0) throw PathError(errno, path);
  try {
    copy_file_data(f.fd_, fd, f.bytes_);
    if (creator) {
      if (::rename(path.c_str(), old_path.c_str()) != 0) throw PathError(errno, old_path);
      path = old_path;
    }
    int rc;
    do {
      rc = ::dup3(fd, f.fd_, O_CLOEXEC);  // the same descriptor number now names the copy
    } while (rc < 0 && (errno == EINTR || errno == EBUSY));
    if (rc < 0) throw PathError(errno, path);
  } catch (...) {
    ::close(fd);
    if (path != old_path) ::unlink(path.c_str());
    throw;
  }
  ::close(fd);
  f.path_ = path;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = live_.find(&f);
    if (it != live_.end()) it->second.pid = me;  // this process removes the copy
  }
  f.epoch_.store(now, std::memory_order_release);
}

}  // namespace sw

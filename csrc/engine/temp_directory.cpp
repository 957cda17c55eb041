#include "temp_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

namespace sw {

namespace {

bool is_directory(const std::string& p) {
  struct stat st;
  return !p.empty() && ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Removes every entry of the open directory fd (recursively), then closes it.
// depth bounds the recursion against pathological trees.
void clear_dir(int fd, int depth) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  const int dfd = ::dirfd(d);
  for (const std::string& n : names) {
    if (::unlinkat(dfd, n.c_str(), 0) == 0) continue;
    if ((errno == EISDIR || errno == EPERM) && depth > 0) {
      // O_NOFOLLOW: a symbolic link named like a directory is never entered.
      int sub = ::openat(dfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) clear_dir(sub, depth - 1);
      ::unlinkat(dfd, n.c_str(), AT_REMOVEDIR);
    }
  }
  ::closedir(d);
}

}  // namespace

void remove_tree(const std::string& path) noexcept {
  if (path.empty()) return;
  if (::unlink(path.c_str()) == 0) return;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  clear_dir(fd, 32);
  ::rmdir(path.c_str());
}

bool TempDirectory::owned() const { return !path_.empty() && pid_ == ::getpid(); }

bool TempDirectory::ready() const { return owned() && is_directory(path_); }

const std::string& TempDirectory::ensure(const std::string& base) {
  if (ready()) return path_;
  // A forked child nests inside its parent's directory while that exists.
  std::string parent = base;
  if (!path_.empty() && pid_ != ::getpid() && is_directory(path_)) parent = path_;
  if (parent.empty()) throw std::system_error(ENOENT, std::generic_category(), "no base directory");
  std::string tmpl = parent + "/" + prefix_ + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    const int err = errno;
    throw std::system_error(err, std::generic_category(), "cannot create a temporary directory in " + parent);
  }
  path_ = buf.data();
  pid_ = ::getpid();
  return path_;
}

void TempDirectory::remove() noexcept {
  if (owned()) remove_tree(path_);
  path_.clear();
  pid_ = 0;
}

}  // namespace sw

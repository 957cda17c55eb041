// FileStorage: slots in a binary file (a temporary file or a region of a
// user's file), and the fork generations its copy-on-write rule counts.
#pragma once
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace sw {

// A removed file of at least this many bytes is closed on the background
// closer (files/fd_closer.hpp, see FileStorage::close_and_unlink); smaller ones on
// the calling thread. Measured on ext4 (2 shared cores): from 64 KiB the
// deferred close takes a fifth to a third off a File->CPU move; at 4 KiB it
// saves nothing.
constexpr int64_t kDeferredCloseBytes = int64_t(64) << 10;

// Fork generations of this process: bumped in both the parent and the child
// of every fork() (pthread_atfork, registered on the first call). A
// temporary file last made private in an older generation may be shared
// with another process (FileStorage::write).
uint64_t fork_epoch() noexcept;

class FileStorage;

// Makes a temporary file private to this process (files/store.hpp: a fresh
// copy in this process's directory takes its place).
class FileUnsharer {
 public:
  virtual void unshare(FileStorage& f) = 0;

 protected:
  ~FileUnsharer() = default;
};

// Slots in a binary file. Throws std::system_error on I/O failure.
//
// Two kinds of file:
// - temporary (create()): the whole file holds the slots; it is removed by
//   close_and_unlink(). When an unsharer is set, the first write or resize
//   after a fork (in whichever process writes) first has the unsharer give
//   this process a private copy, so the processes never see each other's
//   writes, as with memory.
// - a user's file (open_existing(), create_persistent()): never removed,
//   shared like any file across fork. An opened one covers a region of the
//   file (slot 0 at byte base(), bytes() long), which never grows; an opened
//   read-only one refuses writes.
//
// I/O on one storage may run on several threads at once (disjoint spans);
// the path and the descriptor are swapped only under the storage's lock,
// with dup3() onto the same descriptor number, so a concurrent read sees one
// file or the other (their bytes are equal).
class FileStorage {
 public:
  FileStorage() = default;
  FileStorage(const FileStorage&) = delete;
  FileStorage& operator=(const FileStorage&) = delete;
  ~FileStorage() { close_and_unlink(); }

  // Creates a temporary file exclusively (O_EXCL, mode 0600); throws
  // std::system_error with EEXIST when it exists.
  void create(const std::string& path);
  // Opens a user's existing regular file (read-write when writable, else
  // read-only) and returns its size in bytes; the storage covers no bytes
  // until set_region(). Throws std::system_error: the open's errno (ENOENT,
  // EACCES, EISDIR for a directory, ...), EINVAL for a file that is not a
  // regular file.
  int64_t open_existing(const std::string& path, bool writable);
  // The region of an opened file the slots occupy: slot 0 at byte base,
  // bytes long (the caller checked it lies inside the file).
  void set_region(int64_t base, int64_t bytes);
  // Creates a user's file exclusively (mode 0666 less the umask) holding
  // bytes zero bytes; it is never removed. Throws std::system_error (EEXIST
  // when it exists, the failed step's errno otherwise; a file that could not
  // be sized is removed again).
  void create_persistent(const std::string& path, int64_t bytes);

  bool is_open() const { return fd_ >= 0; }
  // The file's path (a copy: a forked process's private copy changes it).
  std::string path() const;
  int64_t bytes() const { return bytes_; }
  // Byte offset of slot 0 in the file (0 but for an opened region).
  int64_t base() const { return base_; }
  bool persistent() const { return persistent_; }
  bool writable() const { return writable_; }
  // Whether resize() may change the size: not for an opened region.
  bool resizable() const { return !region_; }
  // Temporary files: who makes this one private after a fork (null: none).
  void set_unsharer(FileUnsharer* u) { unsharer_ = u; }

  // Grows (or shrinks) the file to bytes, zero-filled. Throws EINVAL for an
  // opened region.
  void resize(int64_t bytes);
  void read(int64_t offset, void* dst, int64_t n) const;
  void write(int64_t offset, const void* src, int64_t n);
  // The n pieces in order over the contiguous file range from offset, as
  // preadv / pwritev calls (a partial one continues where it stopped).
  void read_pieces(int64_t offset, const ::iovec* iov, int n) const;
  void write_pieces(int64_t offset, const ::iovec* iov, int n);
  // Closes the descriptor and removes a temporary file (a user's file
  // stays). From kDeferredCloseBytes up a removed file's descriptor is
  // closed on the background closer just after; the file is gone when this
  // returns. Idempotent.
  void close_and_unlink();
  // Closes the descriptor but leaves the file (a forked child's copy of its
  // parent's storage); idempotent.
  void close_keep_file();

 private:
  friend class FileStore;
  struct Kind {
    bool persistent;  // a user's file: never removed
    bool writable;
    bool region;      // an opened region: fixed size
  };
  // Takes the open descriptor fd of path (bytes long) as this storage's.
  void adopt(int fd, const std::string& path, int64_t bytes, Kind kind);
  // Before a write: refuses a read-only file, and has the unsharer make a
  // temporary file private when a fork happened since it last was.
  void prepare_write();

  int fd_ = -1;
  std::string path_;
  int64_t bytes_ = 0;
  int64_t base_ = 0;
  bool persistent_ = false;
  bool writable_ = true;
  bool region_ = false;
  FileUnsharer* unsharer_ = nullptr;
  // The fork generation this process last had the file to itself in.
  std::atomic<uint64_t> epoch_{0};
  // Guards path_ and the swap of the descriptor (FileStore::unshare).
  mutable std::mutex m_;
};

}  // namespace sw

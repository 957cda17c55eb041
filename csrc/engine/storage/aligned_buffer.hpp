// Native storage: 64-byte aligned host buffers (or an adopted foreign range)
// and file-backed slot storage.
#pragma once
#include <sys/uio.h>
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace sw {

constexpr size_t kStorageAlignment = 64;

// Shared lifetime of one allocation's address range: one reference for the
// owning AlignedBuffer plus one per outstanding export (a DLPack managed
// tensor). Opaque; only drop_export_ref touches it from outside.
struct StorageControl;

// How an adopted foreign range is given back (a DLPack producer's deleter,
// strideweave.from_dlpack): release(ctx) runs exactly once, when the range is
// finally given up. It may run on any thread, with or without the GIL, so it
// must be what the producer's own deleter is: callable from anywhere. A null
// release gives nothing back.
struct ForeignRelease {
  void (*release)(void* ctx) noexcept = nullptr;
  void* ctx = nullptr;
};

// Drops one export reference taken by AlignedBuffer::acquire_export_ref.
// Thread-safe and lock-free up to the final free: it touches only the atomic
// count and, for the last reference of a released buffer, unmaps or frees the
// range (or, for an adopted range, calls its ForeignRelease). No Python, no
// locks: safe on any thread, with or without the GIL, after interpreter
// finalization began. Null is a no-op.
void drop_export_ref(StorageControl* ctl) noexcept;

// One aligned allocation, movable, freed by release() or the destructor.
//
// Exports: acquire_export_ref() pins the address range for a consumer that
// addresses it directly. release() with exports outstanding "retires" the
// range instead of freeing it: it reads as zeros from then on (from
// kReturnPagesBytes up its whole pages are dropped, MADV_DONTNEED, so their
// physical memory is returned at once and zero pages come back on the next
// touch; smaller buffers, and the partial pages at either end of a heap
// buffer, are zeroed in place), writes land in memory nobody else owns, and
// the range is unmapped/freed by the last drop_export_ref. The buffer itself is empty after release() either way.
//
// Adopted ranges (adopt()): memory another library owns, viewed in place.
// It is never zeroed, reused or freed here: release() with no export
// outstanding calls its ForeignRelease at once; with exports outstanding the
// range stays as the producer has it (it cannot be remapped to zeros: other
// views of the producer still read it) and the last drop_export_ref calls
// the ForeignRelease instead of freeing.
// Methods of one AlignedBuffer are not synchronised with each other (the
// owner serialises them); drop_export_ref may race with all of them.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(o.data_),
        bytes_(o.bytes_),
        mapped_(o.mapped_),
        padded_(o.padded_),
        ctl_(o.ctl_),
        foreign_(o.foreign_),
        adopted_(o.adopted_) {
    o.forget();
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  ~AlignedBuffer() { release(); }

  // Allocates bytes (at least one alignment unit, so even an empty buffer
  // has a non-null aligned pointer); zero-fills when zero is true. Throws
  // std::bad_alloc.
  void allocate(size_t bytes, bool zero);
  // Views bytes at data (any alignment; null only with bytes == 0), which
  // another owner holds until release.release(release.ctx) (exactly once,
  // see above). Releases what the buffer held before. Never throws.
  void adopt(void* data, size_t bytes, ForeignRelease release) noexcept;
  // Frees the storage, or retires it while exports are outstanding (above);
  // an adopted range is given back (at once, or by the last export).
  void release();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // True when the storage is an anonymous mapping (see kMappedThreshold).
  bool is_mapped() const { return mapped_ != 0; }
  // True while the buffer views an adopted foreign range.
  bool is_adopted() const { return adopted_; }

  // One reference on the current range for an export; hand it to
  // drop_export_ref exactly once. Null when the buffer holds no storage or
  // the control block cannot be allocated (the caller refuses the export).
  StorageControl* acquire_export_ref() noexcept;
  // Export references currently outstanding on this buffer's range (tests,
  // diagnostics; racy by nature when exports die on other threads).
  size_t export_refs() const noexcept;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  // Length of the anonymous mapping for large buffers (0: heap allocation).
  size_t mapped_ = 0;
  // Allocated length (whole alignment units, or the mapping length).
  size_t padded_ = 0;
  // Created by the first export; null while the range was never exported.
  StorageControl* ctl_ = nullptr;
  // The adopted range's owner (adopted_ true); unused otherwise.
  ForeignRelease foreign_{};
  bool adopted_ = false;
  // Empties the members without freeing anything (moved-from state).
  void forget() noexcept;
};

// Buffers of at least this many bytes are anonymous mappings: the kernel
// hands out zeroed pages lazily (no memset), transparent huge pages are
// requested, and release() gives the memory back at once. Smaller ones come
// from the heap, where a buffer freed by one move is reused by the next
// allocation of its size without faulting fresh pages in (glibc keeps
// chunks below 32 MiB on its heap once one was freed, which is what NumPy's
// fresh arrays get: the same bound here); heap buffers from
// kHugeAdviceBytes up are advised huge pages, as NumPy advises its own.
constexpr size_t kMappedThreshold = size_t(32) << 20;
// Retired buffers (released with exports outstanding) of at least this many
// bytes return their physical memory at once, heap buffers included; below
// it the memset costs less than the system call and what it would return.
constexpr size_t kReturnPagesBytes = size_t(1) << 20;
constexpr size_t kHugeAdviceBytes = size_t(4) << 20;
// Heap buffers of kReuseMinBytes up that their owner frees with no export
// outstanding are kept for the next allocation of the same size
// (storage.cpp, ReuseCache): those up to kReuseCacheBytes in size up to
// kReuseCacheBytes in all, larger ones (below kMappedThreshold: a tiled
// projection's 16 MiB result, say) up to kReuseLargeBytes in all. At most
// kReuseCacheBytes + kReuseLargeBytes of freed memory stay resident.
constexpr size_t kReuseMinBytes = size_t(128) << 10;
constexpr size_t kReuseCacheBytes = size_t(8) << 20;
constexpr size_t kReuseLargeBytes = size_t(32) << 20;

// A removed file of at least this many bytes is closed on the background
// closer (fd_closer.hpp, see FileStorage::close_and_unlink); smaller ones on
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

// Makes a temporary file private to this process (file_store.hpp: a fresh
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

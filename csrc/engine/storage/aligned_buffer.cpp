// Native storage: 64-byte aligned host buffers and file-backed slot storage.
#include "storage/aligned_buffer.hpp"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <system_error>
#include <vector>

#include "files/fd_closer.hpp"

namespace sw {

namespace {

// Heap buffers come from plain malloc, over-allocated by one alignment unit
// and aligned up; the byte before the aligned address keeps the distance
// back (1..64). Plain malloc chunks are reused exactly when a buffer of the
// same size is freed and allocated again (a move frees its source and the
// next one allocates its destination), where memalign's split chunks were
// not: every move then faulted in fresh heap pages.
// Zeroed buffers come from calloc, which skips the memset for memory fresh
// from the kernel (as np.zeros does).
void* heap_aligned(size_t bytes, bool zero) {
  auto* raw = static_cast<unsigned char*>(zero ? std::calloc(1, bytes + kStorageAlignment)
                                               : std::malloc(bytes + kStorageAlignment));
  if (!raw) throw std::bad_alloc();
  const uintptr_t a = (reinterpret_cast<uintptr_t>(raw) + kStorageAlignment) & ~uintptr_t(kStorageAlignment - 1);
  auto* p = reinterpret_cast<unsigned char*>(a);
  p[-1] = static_cast<unsigned char>(p - raw);
  return p;
}

void heap_free(void* data) {
  auto* p = static_cast<unsigned char*>(data);
  std::free(p - p[-1]);
}

// Recently freed heap buffers, kept for the next allocation of the same
// padded size: a move frees its source and the next one allocates a
// destination of that size, and a loop drops one step's result before the
// next step allocates its own, which then needs no fresh pages (on a VM a
// 4 KiB page fault costs about a microsecond: 256 of them per MiB, and the
// kernel zeroes every fresh page). glibc reuses such chunks too, but trims
// the heap top or maps each chunk afresh depending on the order of frees.
// Two bounded caches (kReuseCacheBytes for buffers up to that size,
// kReuseLargeBytes for larger heap buffers; the oldest go first); buffers
// with no export outstanding only; not under ASan, whose quarantine must
// see every free.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kReuseBuffers = false;
#else
constexpr bool kReuseBuffers = true;
#endif

class ReuseCache {
 public:
  // Keeps buffers of [min_bytes, max_bytes] padded bytes, budget in all.
  ReuseCache(size_t min_bytes, size_t max_bytes, size_t budget)
      : min_(min_bytes), max_(max_bytes), budget_(budget) {}
  bool fits(size_t padded) const noexcept { return padded >= min_ && padded <= max_ && padded <= budget_; }
  // A cached buffer of exactly `padded` bytes, or null.
  void* take(size_t padded) noexcept {
    std::lock_guard<std::mutex> lk(m_);
    for (size_t i = count_; i-- > 0;) {
      if (slots_[i].padded != padded) continue;
      void* p = slots_[i].data;
      erase(i);
      return p;
    }
    return nullptr;
  }
  // Keeps data (padded bytes) for reuse; false when it does not fit.
  bool put(void* data, size_t padded) noexcept {
    if (!fits(padded)) return false;
    void* evicted[kSlots];
    size_t n_evicted = 0;
    {
      std::lock_guard<std::mutex> lk(m_);
      while (count_ > 0 && (count_ == kSlots || bytes_ + padded > budget_)) {
        evicted[n_evicted++] = slots_[0].data;
        erase(0);
      }
      slots_[count_++] = Slot{data, padded};
      bytes_ += padded;
    }
    for (size_t i = 0; i < n_evicted; ++i) heap_free(evicted[i]);
    return true;
  }
  // fork(): the child gets the lock free (prepare takes it, both sides give
  // it back), and the cached buffers, which are its memory too.
  void lock() { m_.lock(); }
  void unlock() { m_.unlock(); }

 private:
  // Enough for a batch of buffers freed together (a list of moved results
  // dropped at once) plus the next destination: with 8, a batch of 8
  // emptied the cache and the next move faulted in fresh pages.
  static constexpr size_t kSlots = 16;
  struct Slot {
    void* data;
    size_t padded;
  };
  void erase(size_t i) noexcept {
    bytes_ -= slots_[i].padded;
    for (size_t k = i + 1; k < count_; ++k) slots_[k - 1] = slots_[k];
    --count_;
  }
  const size_t min_, max_, budget_;
  std::mutex m_;
  Slot slots_[kSlots] = {};
  size_t count_ = 0;
  size_t bytes_ = 0;
};

// The cache for buffers of padded bytes (small or large). Never destroyed:
// buffers may be freed during static destruction.
ReuseCache& reuse_cache(size_t padded) {
  struct Caches {
    ReuseCache small{kReuseMinBytes, kReuseCacheBytes, kReuseCacheBytes};
    ReuseCache large{kReuseCacheBytes + 1, kMappedThreshold - 1, kReuseLargeBytes};
  };
  static Caches* caches = [] {
    auto* c = new Caches;
    pthread_atfork(
        [] {
          Caches& all = *caches;
          all.small.lock();
          all.large.lock();
        },
        [] {
          caches->large.unlock();
          caches->small.unlock();
        },
        [] {
          caches->large.unlock();
          caches->small.unlock();
        });
    return c;
  }();
  return padded > kReuseCacheBytes ? caches->large : caches->small;
}

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

void free_range(void* data, size_t mapped) noexcept {
  if (mapped)
    ::munmap(data, mapped);
  else
    heap_free(data);
}

// Frees an owner's range that no export addresses (a candidate for reuse).
void free_owned(void* data, size_t padded, size_t mapped) noexcept {
  if (!mapped && kReuseBuffers && reuse_cache(padded).put(data, padded)) return;
  free_range(data, mapped);
}

// Makes a range that exports still address read as zeros and gives its
// physical memory back where the kernel can. MADV_DONTNEED on private
// anonymous memory (a mapping of ours, or whole pages inside a heap chunk,
// which hold only our bytes: malloc's bookkeeping sits outside them) drops
// the pages now and zero-fills on the next touch; it is preferred to
// mmap(MAP_FIXED) over the range because a failing MAP_FIXED may leave a
// hole behind, and a hole would turn a consumer's read into a crash. Stray
// writes through a retired range then cost 4 KiB pages, not huge pages.
// memset covers the partial pages at a heap buffer's ends, buffers below
// kReturnPagesBytes and any refusal.
void retire_range(void* data, size_t padded, size_t mapped) noexcept {
  if (mapped) {
    if (::madvise(data, mapped, MADV_DONTNEED) == 0) {
#ifdef MADV_NOHUGEPAGE
      ::madvise(data, mapped, MADV_NOHUGEPAGE);  // advisory
#endif
      return;
    }
  } else if (padded >= kReturnPagesBytes) {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(data);
    const uintptr_t hi = lo + padded;
    const uintptr_t first = (lo + page - 1) & ~(page - 1);
    const uintptr_t last = hi & ~(page - 1);
    // No MADV_NOHUGEPAGE here: it would split the heap's mapping, and the
    // chunk goes back to malloc for other buffers.
    if (last > first && ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0) {
      std::memset(data, 0, first - lo);
      std::memset(reinterpret_cast<void*>(last), 0, hi - last);
      return;
    }
  }
  std::memset(data, 0, padded);
}
}  // namespace

struct StorageControl {
  std::atomic<size_t> refs;  // owner (while it holds the range) + exports
  void* data;
  size_t mapped;  // mapping length, 0 for a heap allocation
  ForeignRelease foreign;  // an adopted range's owner
  bool adopted;
};

namespace {
void give_back(const ForeignRelease& f) noexcept {
  if (f.release) f.release(f.ctx);
}
}  // namespace

void drop_export_ref(StorageControl* ctl) noexcept {
  if (!ctl) return;
  if (ctl->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Last reference: the owner released (retired) the range already; an
  // adopted range goes back to its producer.
  if (ctl->adopted)
    give_back(ctl->foreign);
  else
    free_range(ctl->data, ctl->mapped);
  delete ctl;
}

StorageControl* AlignedBuffer::acquire_export_ref() noexcept {
  if (!data_) return nullptr;
  if (!ctl_) {
    // Created lazily: buffers that are never exported pay nothing.
    ctl_ = new (std::nothrow) StorageControl{{1}, data_, mapped_, foreign_, adopted_};
    if (!ctl_) return nullptr;
  }
  ctl_->refs.fetch_add(1, std::memory_order_relaxed);
  return ctl_;
}

size_t AlignedBuffer::export_refs() const noexcept {
  return ctl_ ? ctl_->refs.load(std::memory_order_acquire) - 1 : 0;
}

void AlignedBuffer::forget() noexcept {
  data_ = nullptr;
  bytes_ = 0;
  mapped_ = 0;
  padded_ = 0;
  ctl_ = nullptr;
  foreign_ = ForeignRelease{};
  adopted_ = false;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    mapped_ = o.mapped_;
    padded_ = o.padded_;
    ctl_ = o.ctl_;
    foreign_ = o.foreign_;
    adopted_ = o.adopted_;
    o.forget();
  }
  return *this;
}

void AlignedBuffer::adopt(void* data, size_t bytes, ForeignRelease release_fn) noexcept {
  release();
  data_ = data;
  bytes_ = bytes;
  padded_ = bytes;
  foreign_ = release_fn;
  adopted_ = true;
}

void AlignedBuffer::allocate(size_t bytes, bool zero) {
  release();
  // Round up to whole alignment units (at least one) so the pointer is never
  // null and the tail of the last unit is ours too.
  if (bytes > SIZE_MAX - kStorageAlignment) throw std::bad_alloc();
  size_t padded = bytes == 0 ? kStorageAlignment
                             : (bytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan every buffer stays on the instrumented heap so overflows of
  // large buffers are reported too.
  constexpr bool kUseMappings = false;
#else
  constexpr bool kUseMappings = true;
#endif
  if (kUseMappings && padded >= kMappedThreshold) {
    // Page-aligned (so 64-byte aligned) and already zero.
    void* p = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, padded, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
    data_ = p;
    bytes_ = bytes;
    mapped_ = padded;
    padded_ = padded;
    return;
  }
  if (kReuseBuffers && padded >= kReuseMinBytes) {
    if (void* p = reuse_cache(padded).take(padded)) {
      if (zero) std::memset(p, 0, padded);
      data_ = p;
      bytes_ = bytes;
      padded_ = padded;
      return;
    }
  }
  void* p = heap_aligned(padded, zero);
#ifdef MADV_HUGEPAGE
  if (kUseMappings && padded >= kHugeAdviceBytes) {
    // Advisory, on the whole pages inside the buffer: failure is harmless.
    const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + 4095) & ~uintptr_t(4095);
    const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + padded) & ~uintptr_t(4095);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#endif
  data_ = p;
  bytes_ = bytes;
  padded_ = padded;
}

void AlignedBuffer::release() {
  if (adopted_) {
    // Never zeroed or freed here: other views of the producer's memory
    // still read it. With exports outstanding the last one gives it back.
    if (StorageControl* ctl = ctl_) {
      if (ctl->refs.load(std::memory_order_acquire) == 1) {
        delete ctl;
        give_back(foreign_);
      } else {
        drop_export_ref(ctl);
      }
    } else {
      give_back(foreign_);
    }
    forget();
    return;
  }
  if (data_) {
    if (StorageControl* ctl = ctl_) {
      // Only the owner adds references, so a count of 1 cannot grow under
      // us: every export is gone and the range is the owner's alone, as if
      // never exported. Above 1, exports may die concurrently, and whoever
      // drops the last reference frees the (by then retired) range.
      if (ctl->refs.load(std::memory_order_acquire) == 1) {
        delete ctl;
        free_owned(data_, padded_, mapped_);
      } else {
        retire_range(data_, padded_, mapped_);
        drop_export_ref(ctl);
      }
    } else {
      free_owned(data_, padded_, mapped_);
    }
  }
  forget();
}

namespace {

std::atomic<uint64_t> g_fork_epoch{0};

void bump_fork_epoch() { g_fork_epoch.fetch_add(1, std::memory_order_acq_rel); }

int open_retrying(const char* path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

uint64_t fork_epoch() noexcept {
  // Registered once, before any file could be shared: both sides of a fork
  // move to a new generation.
  static const bool registered = [] {
    pthread_atfork(nullptr, bump_fork_epoch, bump_fork_epoch);
    return true;
  }();
  (void)registered;
  return g_fork_epoch.load(std::memory_order_acquire);
}

void FileStorage::create(const std::string& path) {
  close_and_unlink();
  const int fd = open_retrying(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(errno, "cannot create " + path);
  adopt(fd, path, 0, Kind{false, true, false});
}

void FileStorage::adopt(int fd, const std::string& path, int64_t bytes, Kind kind) {
  std::lock_guard<std::mutex> lk(m_);
  fd_ = fd;
  path_ = path;
  bytes_ = bytes;
  base_ = 0;
  persistent_ = kind.persistent;
  writable_ = kind.writable;
  region_ = kind.region;
  unsharer_ = nullptr;
  epoch_.store(fork_epoch(), std::memory_order_release);
}

int64_t FileStorage::open_existing(const std::string& path, bool writable) {
  close_and_unlink();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below, and on a regular file the flag changes nothing.
  const int fd = open_retrying(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK, 0);
  if (fd < 0) throw_errno(errno, "cannot open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno(err, "cannot stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_errno(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, path + " is not a regular file");
  }
  adopt(fd, path, 0, Kind{true, writable, true});
  return static_cast<int64_t>(st.st_size);
}

void FileStorage::set_region(int64_t base, int64_t bytes) {
  if (base < 0 || bytes < 0) throw_errno(EINVAL, "negative file region");
  base_ = base;
  bytes_ = bytes;
}

void FileStorage::create_persistent(const std::string& path, int64_t bytes) {
  close_and_unlink();
  if (bytes < 0) throw_errno(EINVAL, "negative file size");
  const int fd = open_retrying(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno(errno, "cannot create " + path);
  int rc;
  do {
    rc = ::ftruncate(fd, static_cast<off_t>(bytes));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());  // created just now, by us
    throw_errno(err, "cannot size " + path);
  }
  adopt(fd, path, bytes, Kind{true, true, false});
}

std::string FileStorage::path() const {
  // Only an unshare changes the path while other threads use the storage;
  // without an unsharer no lock is needed (nor taken, so a user's file
  // never waits on a lock a thread of the parent held through a fork).
  if (!unsharer_) return path_;
  std::lock_guard<std::mutex> lk(m_);
  return path_;
}

void FileStorage::prepare_write() {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (!writable_) throw_errno(EBADF, "cannot write " + path() + ": it was opened read-only");
  if (unsharer_ && epoch_.load(std::memory_order_acquire) != fork_epoch()) unsharer_->unshare(*this);
}

void FileStorage::resize(int64_t bytes) {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (bytes < 0) throw_errno(EINVAL, "negative file size");
  if (region_) throw_errno(EINVAL, "an opened file region has a fixed size");
  prepare_write();
  int rc;
  do {
    rc = ::ftruncate(fd_, static_cast<off_t>(bytes));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno(errno, "cannot resize " + path());
  bytes_ = bytes;
}

void FileStorage::read(int64_t offset, void* dst, int64_t n) const {
  if (fd_ < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  auto* p = static_cast<char*>(dst);
  offset += base_;
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot read " + path());
    }
    // End of file before n bytes: the slots asked for do not exist.
    if (r == 0) throw_errno(EIO, "short read from " + path());
    p += r;
    offset += r;
    n -= r;
  }
}

void FileStorage::write(int64_t offset, const void* src, int64_t n) {
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  prepare_write();
  const auto* p = static_cast<const char*>(src);
  const int64_t end = offset + n;
  offset += base_;
  while (n > 0) {
    ssize_t r = ::pwrite(fd_, p, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "cannot write " + path());
    }
    if (r == 0) throw_errno(ENOSPC, "short write to " + path());
    p += r;
    offset += r;
    n -= r;
  }
  if (end > bytes_) bytes_ = end;
}

namespace {
// Calls io(fd, iov, n, offset) until all of iov went through; returns the bytes.
template <class IO>
int64_t vectored(int fd, int64_t offset, const ::iovec* iov, int n, IO io, const char* what, int short_errno,
                 const std::string& path) {
  if (fd < 0) throw_errno(EBADF, "file storage is not open");
  if (offset < 0 || n < 0) throw_errno(EINVAL, "negative file offset or length");
  std::vector<::iovec> left(iov, iov + n);
  size_t first = 0;
  int64_t total = 0;
  while (first < left.size()) {
    if (left[first].iov_len == 0) {
      ++first;
      continue;
    }
    const int count = static_cast<int>(std::min<size_t>(left.size() - first, IOV_MAX));
    ssize_t r = io(fd, left.data() + first, count, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, std::string("cannot ") + what + " " + path);
    }
    if (r == 0) throw_errno(short_errno, std::string("short ") + what + " of " + path);
    offset += r;
    total += r;
    for (size_t done = static_cast<size_t>(r); done > 0;) {
      const size_t step = std::min(done, left[first].iov_len);
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + step;
      left[first].iov_len -= step;
      done -= step;
      if (left[first].iov_len == 0) ++first;
    }
  }
  return total;
}
}  // namespace

void FileStorage::read_pieces(int64_t offset, const ::iovec* iov, int n) const {
  if (offset < 0) throw_errno(EINVAL, "negative file offset or length");
  vectored(fd_, base_ + offset, iov, n, ::preadv, "read", EIO, path());
}

void FileStorage::write_pieces(int64_t offset, const ::iovec* iov, int n) {
  if (offset < 0) throw_errno(EINVAL, "negative file offset or length");
  prepare_write();
  const int64_t end = offset + vectored(fd_, base_ + offset, iov, n, ::pwritev, "write", ENOSPC, path());
  if (end > bytes_) bytes_ = end;
}

void FileStorage::close_and_unlink() {
  std::unique_lock<std::mutex> lk(m_);
  if (persistent_) {
    // A user's file: never removed, and its page cache stays useful, so
    // the close is cheap and runs here.
    lk.unlock();
    close_keep_file();
    return;
  }
  if (fd_ >= 0 && bytes_ >= kDeferredCloseBytes) {
    // The name goes now (the open descriptor keeps the inode), so the file
    // is gone from the file system when this returns; the last close, which
    // frees its page cache and blocks at a cost that grows with its size,
    // runs on the background closer (fd_closer.hpp).
    if (!path_.empty()) ::unlink(path_.c_str());
    path_.clear();
    close_in_background(fd_, bytes_);
    fd_ = -1;
    bytes_ = 0;
    unsharer_ = nullptr;
    return;
  }
  // A small file: closed first, then removed, so the unlink frees the inode
  // at once (removing an open file puts it on ext4's orphan list, one more
  // journal update). Below kDeferredCloseBytes that teardown costs less than
  // the hand-off.
  if (fd_ >= 0) {
    ::close(fd_);  // no EINTR retry: on Linux the descriptor is gone either way
    fd_ = -1;
  }
  if (!path_.empty()) {
    ::unlink(path_.c_str());  // best effort: already gone is fine
    path_.clear();
  }
  bytes_ = 0;
  unsharer_ = nullptr;
}

void FileStorage::close_keep_file() {
  std::lock_guard<std::mutex> lk(m_);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  path_.clear();
  bytes_ = 0;
  base_ = 0;
  persistent_ = false;
  writable_ = true;
  region_ = false;
  unsharer_ = nullptr;
}

}  // namespace sw

// Host storage (storage/aligned_buffer.hpp): allocation, export references,
// retirement and adopted foreign ranges.
#include "storage/aligned_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

#include "storage/heap.hpp"
#include "storage/reuse_cache.hpp"

namespace sw {

namespace {

void free_range(void* data, size_t mapped) noexcept {
  if (mapped)
    ::munmap(data, mapped);
  else
    heap_free(data);
}

// Frees an owner's range that no export addresses (a candidate for reuse).
void free_owned(void* data, size_t padded, size_t mapped) noexcept {
  if (!mapped && reuse_put(data, padded)) return;
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
  // A fresh buffer (every import's) holds nothing to give back.
  if (data_ || adopted_) release();
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
  if (padded >= kReuseMinBytes) {
    if (void* p = reuse_take(padded)) {
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

}  // namespace sw

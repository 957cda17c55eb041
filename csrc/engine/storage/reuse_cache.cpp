// The reuse cache of freed heap buffers (storage/reuse_cache.hpp).
#include "storage/reuse_cache.hpp"

#include <pthread.h>

#include <mutex>

#include "storage/aligned_buffer.hpp"
#include "storage/heap.hpp"

namespace sw {

namespace {

// Off under ASan, whose quarantine must see every free.
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

}  // namespace

void* reuse_take(size_t padded) noexcept {
  if (!kReuseBuffers) return nullptr;
  return reuse_cache(padded).take(padded);
}

bool reuse_put(void* data, size_t padded) noexcept {
  return kReuseBuffers && reuse_cache(padded).put(data, padded);
}

}  // namespace sw

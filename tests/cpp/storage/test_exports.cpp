// AlignedBuffer export references: releasing exported storage retires the
// range (zeros, physical memory returned for mappings) and the last export
// reference frees it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "dlpack/export.hpp"
#include "storage/aligned_buffer.hpp"
#include "builders.hpp"

using swtest::all_zero;
namespace {

using sw::AlignedBuffer;
using sw::StorageControl;

constexpr size_t kSmall = 1000;                         // heap buffer
constexpr size_t kLarge = sw::kMappedThreshold + 4096;  // mapped (outside ASan)

size_t page() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

// Pages of [p, p + n) resident in memory; -1 when (part of) the range is not
// mapped at all (mincore fails with ENOMEM).
long resident_pages(void* p, size_t n) {
  size_t pages = (n + page() - 1) / page();
  std::vector<unsigned char> vec(pages);
  if (::mincore(p, n, vec.data()) != 0) return errno == ENOMEM ? -1 : -2;
  long r = 0;
  for (unsigned char v : vec) r += v & 1;
  return r;
}

TEST(StorageExports, EmptyBufferHasNothingToExport) {
  AlignedBuffer b;
  EXPECT_EQ(b.acquire_export_ref(), nullptr);
  EXPECT_EQ(b.export_refs(), 0u);
  sw::drop_export_ref(nullptr);  // no-op
}

TEST(StorageExports, ReleaseWithoutExportsFreesAtOnce) {
  for (size_t n : {kSmall, kLarge}) {
    AlignedBuffer b;
    b.allocate(n, true);
    void* p = b.data();
    const bool mapped = b.is_mapped();
    b.release();
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(b.bytes(), 0u);
    if (mapped) {
      EXPECT_EQ(resident_pages(p, n), -1) << "mapping must be gone";
    }
  }
}

TEST(StorageExports, ExportsDroppedBeforeReleaseLeaveNormalRelease) {
  AlignedBuffer b;
  b.allocate(kSmall, true);
  StorageControl* a = b.acquire_export_ref();
  StorageControl* c = b.acquire_export_ref();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, c);  // one control block per range
  EXPECT_EQ(b.export_refs(), 2u);
  sw::drop_export_ref(a);
  sw::drop_export_ref(c);
  EXPECT_EQ(b.export_refs(), 0u);
  static_cast<char*>(b.data())[0] = 7;  // still the owner's storage
  b.release();
  EXPECT_EQ(b.data(), nullptr);
}

void check_retire(size_t n) {
  AlignedBuffer b;
  b.allocate(n, false);
  auto* p = static_cast<unsigned char*>(b.data());
  std::memset(p, 0xAB, n);
  const bool mapped = b.is_mapped();
  StorageControl* ref = b.acquire_export_ref();
  ASSERT_NE(ref, nullptr);
  b.release();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_EQ(b.export_refs(), 0u);  // the buffer no longer tracks the range
  // Still addressable, reads zeros from the moment of release.
  EXPECT_TRUE(all_zero(p, n));
  if (mapped) {
    EXPECT_GE(resident_pages(p, n), 0) << "range must stay mapped while exported";
  }
  p[0] = 1;  // a stray write through the export lands in the retired range
  p[n - 1] = 2;
  sw::drop_export_ref(ref);
  if (mapped) {
    EXPECT_EQ(resident_pages(p, n), -1) << "last reference unmaps";
  }
}

TEST(StorageExports, RetiredHeapRangeReadsZeros) { check_retire(kSmall); }
TEST(StorageExports, RetiredMappedRangeReadsZeros) { check_retire(kLarge); }

TEST(StorageExports, RetiringAMappingReturnsItsPhysicalMemory) {
  AlignedBuffer b;
  b.allocate(kLarge, false);
  if (!b.is_mapped()) GTEST_SKIP() << "no mappings in this build (ASan keeps buffers on the heap)";
  auto* p = static_cast<unsigned char*>(b.data());
  std::memset(p, 0x5A, kLarge);  // fault every page in
  EXPECT_GT(resident_pages(p, kLarge), static_cast<long>(kLarge / page() / 2));
  StorageControl* ref = b.acquire_export_ref();
  b.release();
  EXPECT_EQ(resident_pages(p, kLarge), 0) << "physical pages must be returned at release";
  sw::drop_export_ref(ref);
}

// Heap buffers from kReturnPagesBytes up (below the mapping threshold) give
// their whole pages back at release too; the partial pages at either end,
// which malloc's neighbours share, are zeroed in place.
TEST(StorageExports, RetiringAHeapBufferOfOneMiBReturnsItsPhysicalMemory) {
  for (size_t n : {sw::kReturnPagesBytes, sw::kReturnPagesBytes * 4 + 100, sw::kMappedThreshold - 4096}) {
    AlignedBuffer b;
    b.allocate(n, false);
    ASSERT_FALSE(b.is_mapped()) << n;
    auto* p = static_cast<unsigned char*>(b.data());
    std::memset(p, 0x5A, n);  // fault every page in
    const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + page() - 1) & ~uintptr_t(page() - 1);
    const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + n) & ~uintptr_t(page() - 1);
    void* inner = reinterpret_cast<void*>(first);
    const size_t inner_bytes = last - first;
    EXPECT_EQ(resident_pages(inner, inner_bytes), static_cast<long>(inner_bytes / page())) << n;
    StorageControl* ref = b.acquire_export_ref();
    ASSERT_NE(ref, nullptr);
    b.release();
    EXPECT_EQ(resident_pages(inner, inner_bytes), 0) << n << ": physical pages must be returned at release";
    EXPECT_TRUE(all_zero(p, n)) << n;  // ends zeroed, the rest zero pages on touch
    sw::drop_export_ref(ref);
  }
}

TEST(StorageExports, LastOfManyReferencesFrees) {
  AlignedBuffer b;
  b.allocate(kLarge, true);
  void* p = b.data();
  const bool mapped = b.is_mapped();
  std::vector<StorageControl*> refs;
  for (int i = 0; i < 5; ++i) refs.push_back(b.acquire_export_ref());
  EXPECT_EQ(b.export_refs(), 5u);
  b.release();
  for (size_t i = 0; i + 1 < refs.size(); ++i) {
    sw::drop_export_ref(refs[i]);
    if (mapped) {
      EXPECT_GE(resident_pages(p, kLarge), 0);
    }
  }
  sw::drop_export_ref(refs.back());
  if (mapped) {
    EXPECT_EQ(resident_pages(p, kLarge), -1);
  }
}

TEST(StorageExports, ReallocateAfterExportGetsANewRange) {
  AlignedBuffer b;
  b.allocate(kSmall, true);
  StorageControl* old_ref = b.acquire_export_ref();
  auto* old_p = static_cast<unsigned char*>(b.data());
  b.allocate(kSmall, true);  // releases (retires) the exported range first
  EXPECT_NE(b.data(), old_p);
  EXPECT_EQ(b.export_refs(), 0u);
  std::memset(b.data(), 0xFF, kSmall);
  EXPECT_TRUE(all_zero(old_p, kSmall));
  StorageControl* new_ref = b.acquire_export_ref();
  EXPECT_NE(new_ref, old_ref);
  sw::drop_export_ref(old_ref);
  sw::drop_export_ref(new_ref);
}

TEST(StorageExports, MovedBufferKeepsItsReferences) {
  AlignedBuffer a;
  a.allocate(kSmall, true);
  StorageControl* ref = a.acquire_export_ref();
  AlignedBuffer b(std::move(a));
  EXPECT_EQ(a.export_refs(), 0u);
  EXPECT_EQ(b.export_refs(), 1u);
  AlignedBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.export_refs(), 1u);
  auto* p = static_cast<unsigned char*>(c.data());
  p[3] = 9;
  c.release();
  EXPECT_TRUE(all_zero(p, kSmall));
  sw::drop_export_ref(ref);
}

TEST(StorageExports, DestructorRetiresLikeRelease) {
  StorageControl* ref;
  unsigned char* p;
  {
    AlignedBuffer b;
    b.allocate(kSmall, false);
    p = static_cast<unsigned char*>(b.data());
    std::memset(p, 0x11, kSmall);
    ref = b.acquire_export_ref();
  }
  EXPECT_TRUE(all_zero(p, kSmall));
  sw::drop_export_ref(ref);
}

// Exports die on many threads, racing the owner's release: every range is
// freed exactly once (ASan/LSan and the mapping checks would see otherwise).
TEST(StorageExports, ReferencesDropOnManyThreads) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  for (size_t n : {kSmall, kLarge}) {
    for (int round = 0; round < (n == kSmall ? kRounds : 10); ++round) {
      AlignedBuffer b;
      b.allocate(n, true);
      void* p = b.data();
      const bool mapped = b.is_mapped();
      std::vector<StorageControl*> refs(kThreads);
      for (auto& r : refs) r = b.acquire_export_ref();
      std::atomic<int> go{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
          while (!go.load(std::memory_order_acquire)) {
          }
          const auto* q = static_cast<const volatile unsigned char*>(p);
          (void)q[(n / kThreads) * i];  // a consumer read racing the release
          sw::drop_export_ref(refs[i]);
        });
      }
      go.store(1, std::memory_order_release);
      b.release();
      for (auto& t : threads) t.join();
      if (mapped) {
        EXPECT_EQ(resident_pages(p, n), -1);
      }
    }
  }
}

TEST(StorageExports, ManagedTensorDeleterDropsTheStorageReference) {
  AlignedBuffer b;
  b.allocate(kSmall, true);
  sw::LeafMode leaf{4, 1};
  sw::dlpack::ExportSpec spec;
  spec.data = b.data();
  spec.leaves = std::span<const sw::LeafMode>(&leaf, 1);
  spec.storage = b.acquire_export_ref();
  static int owner_calls;
  owner_calls = 0;
  DLManagedTensor* m = sw::dlpack::make_legacy(spec, &owner_calls, [](void* o) noexcept { ++*static_cast<int*>(o); });
  ASSERT_NE(m, nullptr);
  spec.storage = b.acquire_export_ref();
  DLManagedTensorVersioned* v = sw::dlpack::make_versioned(spec, nullptr, nullptr);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(b.export_refs(), 2u);
  auto* p = static_cast<float*>(m->dl_tensor.data);
  p[0] = 3.0f;
  b.release();
  EXPECT_EQ(p[0], 0.0f);
  // A deleter run on another thread, as a consumer's runtime may do.
  std::thread([m] { m->deleter(m); }).join();
  EXPECT_EQ(owner_calls, 1);
  EXPECT_EQ(static_cast<float*>(v->dl_tensor.data)[0], 0.0f);
  v->deleter(v);
}

}  // namespace

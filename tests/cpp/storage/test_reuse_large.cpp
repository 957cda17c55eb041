// AlignedBuffer's reuse of large freed heap buffers (above kReuseCacheBytes,
// below kMappedThreshold: a tiled projection's 16 MiB result) and of
// buffers whose exports were all dropped before release; the large cache
// stays within kReuseLargeBytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "storage/aligned_buffer.hpp"
#include "storage/reuse_cache.hpp"
#include "builders.hpp"

using swtest::all_zero;
using swtest::kSanitized;

namespace {

constexpr size_t kLarge = size_t(16) << 20;

}  // namespace

TEST(StorageReuseLarge, BoundsAreOrdered) {
  static_assert(kLarge > sw::kReuseCacheBytes && kLarge < sw::kMappedThreshold);
  static_assert(sw::kReuseLargeBytes >= kLarge, "one projection-sized buffer fits the large cache");
  SUCCEED();
}

TEST(StorageReuseLarge, SixteenMiBIsAHeapBufferAndIsReused) {
  if (kSanitized) GTEST_SKIP() << "no reuse under ASan";
  sw::AlignedBuffer a;
  a.allocate(kLarge, false);
  EXPECT_FALSE(a.is_mapped());
  void* p = a.data();
  std::memset(p, 0xCD, kLarge);
  a.release();
  sw::AlignedBuffer b;
  b.allocate(kLarge, false);
  EXPECT_EQ(b.data(), p) << "the freed 16 MiB buffer is handed to the next allocation of its size";
  b.release();
  sw::AlignedBuffer c;
  c.allocate(kLarge, true);
  EXPECT_EQ(c.data(), p);
  EXPECT_TRUE(all_zero(c.data(), kLarge)) << "a zeroed allocation reads zeros";
}

TEST(StorageReuseLarge, BuffersAtTheThresholdStayMappings) {
  sw::AlignedBuffer a;
  a.allocate(sw::kMappedThreshold, false);
  EXPECT_EQ(a.is_mapped(), !kSanitized);
  sw::AlignedBuffer b;
  b.allocate(sw::kMappedThreshold - sw::kStorageAlignment, false);
  EXPECT_FALSE(b.is_mapped());
}

TEST(StorageReuseLarge, ExportsDroppedBeforeReleaseDoNotBarReuse) {
  if (kSanitized) GTEST_SKIP() << "no reuse under ASan";
  for (size_t n : {sw::kReuseMinBytes * 2, kLarge}) {
    sw::AlignedBuffer a;
    a.allocate(n, false);
    void* p = a.data();
    sw::StorageControl* ref = a.acquire_export_ref();
    ASSERT_NE(ref, nullptr);
    sw::drop_export_ref(ref);  // the consumer is gone before the owner frees
    EXPECT_EQ(a.export_refs(), 0u);
    a.release();
    sw::AlignedBuffer b;
    b.allocate(n, false);
    EXPECT_EQ(b.data(), p) << n;
    sw::StorageControl* again = b.acquire_export_ref();  // a fresh control block
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(b.export_refs(), 1u);
    sw::drop_export_ref(again);
  }
}

TEST(StorageReuseLarge, AnOutstandingExportStillBarsReuse) {
  sw::AlignedBuffer a;
  a.allocate(kLarge, false);
  void* p = a.data();
  std::memset(p, 0x11, kLarge);
  sw::StorageControl* ref = a.acquire_export_ref();
  a.release();  // retired: zeros from now on, never handed out again
  sw::AlignedBuffer b;
  b.allocate(kLarge, false);
  EXPECT_NE(b.data(), p);
  EXPECT_TRUE(all_zero(p, kLarge));
  sw::drop_export_ref(ref);
}

TEST(StorageReuseLarge, LargeCacheIsBounded) {
  if (kSanitized) GTEST_SKIP() << "no reuse under ASan";
  constexpr size_t n = size_t(12) << 20;
  constexpr size_t count = 5;
  std::set<void*> freed;
  {
    std::vector<sw::AlignedBuffer> bufs(count);
    for (auto& b : bufs) {
      b.allocate(n, false);
      std::memset(b.data(), 1, n);
    }
    for (auto& b : bufs) freed.insert(b.data());
  }  // all freed: at most kReuseLargeBytes / n of them kept
  std::vector<sw::AlignedBuffer> again(count);
  size_t reused = 0;
  for (auto& b : again) {
    b.allocate(n, true);
    ASSERT_TRUE(all_zero(b.data(), n));
    reused += freed.count(b.data());
  }
  // (a buffer glibc handed back out is not told apart from a cached one, so
  // only the cache's part can be bounded from below)
  EXPECT_GE(reused, 1u);
  std::set<void*> distinct;
  for (auto& b : again) distinct.insert(b.data());
  EXPECT_EQ(distinct.size(), count);
}

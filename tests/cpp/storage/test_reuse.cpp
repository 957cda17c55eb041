// AlignedBuffer's reuse of freed heap buffers: a buffer its owner frees is
// handed to the next allocation of the same size, zeroed when asked; an
// exported one never is; the cache stays bounded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "storage/aligned_buffer.hpp"
#include "storage/reuse_cache.hpp"
#include "builders.hpp"

using swtest::all_zero;
using swtest::kSanitized;

namespace {

constexpr size_t kSize = sw::kReuseMinBytes * 2;

}  // namespace

TEST(StorageReuse, FreedBufferIsReusedAndZeroedWhenAsked) {
  if (kSanitized) GTEST_SKIP() << "no reuse under ASan";
  sw::AlignedBuffer a;
  a.allocate(kSize, false);
  void* p = a.data();
  std::memset(p, 0xAB, kSize);
  a.release();
  sw::AlignedBuffer b;
  b.allocate(kSize, true);
  EXPECT_EQ(b.data(), p) << "the freed buffer of the same size is reused";
  EXPECT_TRUE(all_zero(b.data(), kSize)) << "a zeroed allocation reads zeros";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sw::kStorageAlignment, 0u);
}

TEST(StorageReuse, ExportedBufferIsNotReused) {
  sw::AlignedBuffer a;
  a.allocate(kSize, false);
  void* p = a.data();
  sw::StorageControl* ref = a.acquire_export_ref();
  ASSERT_NE(ref, nullptr);
  a.release();  // retired: the export still addresses it
  sw::AlignedBuffer b;
  b.allocate(kSize, false);
  EXPECT_NE(b.data(), p) << "a retired range must not be handed out again";
  EXPECT_TRUE(all_zero(p, kSize));
  sw::drop_export_ref(ref);
}

TEST(StorageReuse, OtherSizesAndSmallBuffersAreNotMixedUp) {
  if (kSanitized) GTEST_SKIP() << "no reuse under ASan";
  sw::AlignedBuffer a;
  a.allocate(kSize, false);
  void* p = a.data();
  a.release();
  sw::AlignedBuffer b;
  b.allocate(kSize + sw::kStorageAlignment, false);
  EXPECT_NE(b.data(), p);
  sw::AlignedBuffer c;
  c.allocate(kSize, false);
  EXPECT_EQ(c.data(), p);
}

TEST(StorageReuse, CacheIsBounded) {
  // Freeing more than the cache holds frees the oldest; every buffer stays
  // usable and distinct while alive.
  std::vector<sw::AlignedBuffer> bufs(2 * sw::kReuseCacheBytes / kSize + 4);
  for (auto& b : bufs) {
    b.allocate(kSize, true);
    ASSERT_TRUE(all_zero(b.data(), kSize));
    std::memset(b.data(), 1, kSize);
  }
  bufs.clear();
  std::vector<sw::AlignedBuffer> again(2 * sw::kReuseCacheBytes / kSize + 4);
  for (auto& b : again) {
    b.allocate(kSize, true);
    ASSERT_TRUE(all_zero(b.data(), kSize));
  }
}

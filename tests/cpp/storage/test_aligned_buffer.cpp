// AlignedBuffer: alignment, ownership moves, release, large mappings.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <utility>

#include "storage/aligned_buffer.hpp"

TEST(AlignedBuffer, AlignedForManySizes) {
  for (size_t n : {0u, 1u, 3u, 63u, 64u, 65u, 1000u, 4096u, 100001u}) {
    sw::AlignedBuffer b;
    b.allocate(n, true);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sw::kStorageAlignment, 0u) << n;
    EXPECT_EQ(b.bytes(), n);
    const auto* p = static_cast<const unsigned char*>(b.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0) << n << " " << i;
  }
}

TEST(AlignedBuffer, ReleaseIsIdempotent) {
  sw::AlignedBuffer b;
  b.allocate(16, false);
  b.release();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
  b.release();
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, MoveTransfersOwnership) {
  sw::AlignedBuffer a;
  a.allocate(128, true);
  void* p = a.data();
  sw::AlignedBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.bytes(), 128u);
  sw::AlignedBuffer c;
  c.allocate(8, false);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
}

TEST(AlignedBuffer, ReallocateReplaces) {
  sw::AlignedBuffer b;
  b.allocate(4, true);
  static_cast<unsigned char*>(b.data())[0] = 7;
  b.allocate(256, true);
  EXPECT_EQ(b.bytes(), 256u);
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[0], 0);
}

TEST(AlignedBuffer, HugeAllocationThrowsBadAlloc) {
  sw::AlignedBuffer b;
  EXPECT_THROW(b.allocate(SIZE_MAX - 8, false), std::bad_alloc);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, LargeBuffersAreZeroedAlignedMappings) {
  sw::AlignedBuffer b;
  const size_t n = sw::kMappedThreshold + 3;
  b.allocate(n, /*zero=*/true);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sw::kStorageAlignment, 0u);
  EXPECT_EQ(b.bytes(), n);
  const unsigned char* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < n; i += 4093) EXPECT_EQ(p[i], 0);
  static_cast<unsigned char*>(b.data())[n - 1] = 7;  // whole span writable
  sw::AlignedBuffer moved(std::move(b));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(static_cast<const unsigned char*>(moved.data())[n - 1], 7);
  sw::AlignedBuffer assigned;
  assigned.allocate(16, true);
  assigned = std::move(moved);  // frees the small one, takes the mapping
  EXPECT_EQ(assigned.bytes(), n);
  assigned.release();
  EXPECT_EQ(assigned.data(), nullptr);
}

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "layout/layout.hpp"
#include "transfer/strided_copy.hpp"
#include "builders.hpp"

using swtest::iota;
using swtest::node;
TEST(CopySpan, CopiesWholeSpan) {
  auto src = iota(100);
  std::vector<float> dst(100, -1.0f);
  sw::copy_span(dst.data(), src.data(), 100, 4);
  EXPECT_EQ(dst, src);
  sw::copy_span(dst.data(), src.data(), 0, 4);  // nothing
}

TEST(StridedCopy, CompactLayoutCopiesEveryElement) {
  sw::Layout l(node({3, 4}), node({1, 3}));
  auto src = iota(20);
  std::vector<float> dst(12, 0.0f);
  sw::strided_copy(dst.data(), 0, src.data(), 5, l, 4);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(dst[i], src[5 + i]);
}

TEST(StridedCopy, GappedLayoutLeavesHoles) {
  // shape (2,3) stride (1,4): slots 0,1,4,5,8,9 addressed; 2,3,6,7 are holes.
  sw::Layout l(node({2, 3}), node({1, 4}));
  ASSERT_EQ(l.cosize(), 10);
  auto src = iota(10);
  std::vector<float> dst(10, -7.0f);
  sw::strided_copy(dst.data(), 0, src.data(), 0, l, 4);
  for (int i : {0, 1, 4, 5, 8, 9}) EXPECT_EQ(dst[i], src[i]) << i;
  for (int i : {2, 3, 6, 7}) EXPECT_EQ(dst[i], -7.0f) << i;
}

TEST(StridedCopy, BroadcastLayoutCopiesItsSpan) {
  // Two elements broadcast over six coordinates: cosize 2.
  sw::Layout l(node({2, 3}), node({1, 0}));
  ASSERT_EQ(l.cosize(), 2);
  std::vector<int32_t> src{10, 20, 30};
  std::vector<int32_t> dst(2, 0);
  sw::strided_copy(dst.data(), 0, src.data(), 1, l, 4);
  EXPECT_EQ(dst, (std::vector<int32_t>{20, 30}));
}

TEST(StridedCopy, NestedLayoutAndItemSizes) {
  // shape (2,(2,2)) stride (2,(1,4)): a permuted nested layout over 8 slots.
  sw::Layout l(sw::IntTree::node({sw::IntTree::leaf(2), node({2, 2})}),
               sw::IntTree::node({sw::IntTree::leaf(2), node({1, 4})}));
  std::vector<uint8_t> s8(8), d8(8, 0);
  std::vector<double> s64(8), d64(8, 0);
  for (int i = 0; i < 8; ++i) { s8[i] = static_cast<uint8_t>(i + 1); s64[i] = i + 0.5; }
  sw::strided_copy(d8.data(), 0, s8.data(), 0, l, 1);
  sw::strided_copy(d64.data(), 0, s64.data(), 0, l, 8);
  EXPECT_EQ(d8, s8);
  EXPECT_EQ(d64, s64);
}

TEST(StridedCopy, DifferentStridesRelayout) {
  // Transpose a 3x2 column-major block into row-major order.
  std::vector<int32_t> src{1, 2, 3, 4, 5, 6};  // (3,2) strides (1,3)
  std::vector<int32_t> dst(6, 0);               // (3,2) strides (2,1)
  sw::strided_copy(dst.data(), 0, {2, 1}, src.data(), 0, {1, 3}, {3, 2}, 4);
  EXPECT_EQ(dst, (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST(StridedCopy, LargeContiguousMatchesSpan) {
  const int64_t n = 1 << 20;
  sw::Layout l(node({1024, 1024}), node({1, 1024}));
  auto src = iota(static_cast<size_t>(n));
  std::vector<float> dst(static_cast<size_t>(n), 0.0f);
  sw::strided_copy(dst.data(), 0, src.data(), 0, l, 4);
  EXPECT_EQ(dst, src);
}

TEST(StridedCopy, OddItemSize) {
  std::vector<char> src{'a', 'b', 'c', 'd', 'e', 'f'};
  std::vector<char> dst(6, '.');
  // Two 3-byte items, laid out with stride 1 item on both sides.
  sw::strided_copy(dst.data(), 0, {1}, src.data(), 0, {1}, {2}, 3);
  EXPECT_EQ(dst, src);
  std::vector<char> gapped(6, '.');
  sw::strided_copy(gapped.data(), 0, {2}, src.data(), 0, {2}, {1}, 3);
  EXPECT_EQ(std::string(gapped.begin(), gapped.end()), "abc...");
  std::fill(dst.begin(), dst.end(), '.');
  sw::strided_copy(dst.data(), 0, {1}, src.data(), 0, {1}, {2}, 3);
  EXPECT_EQ(dst, src);
}

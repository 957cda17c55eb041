// Ranges on a hierarchical mode whose offsets are evenly spaced are one leaf
// of that spacing (csrc/engine/layout_slice.hpp: range_spacing and its use
// in slice_layout).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "layout/algebra.hpp"
#include "layout/slice.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::Layout;
using sw::LeafMode;
using sw::SlicePart;
using sw::SliceStatus;

namespace {

// Brute force: the offsets of the range are an arithmetic progression.
bool evenly_spaced(const std::vector<int64_t>& all, int64_t start, int64_t step, int64_t n, int64_t* spacing) {
  *spacing = n < 2 ? 0 : all[start + step] - all[start];
  for (int64_t k = 1; k + 1 < n; ++k)
    if (all[start + (k + 1) * step] - all[start + k * step] != *spacing) return false;
  return true;
}

// The issue's example: mode 0 is (2, 3):(1, 10), mode 1 is 4:30.
const Layout kH(N({N({L(2), L(3)}), L(4)}), N({N({L(1), L(10)}), L(30)}));

}  // namespace

// Every range of a set of modes (ones that coalesce, stride 0, carries that
// line up only by accident): range_spacing says exactly what enumeration says.
TEST(LayoutSliceSpacing, AgreesWithEnumerationOnEveryRange) {
  std::vector<std::vector<LeafMode>> modes = {
      {{2, 1}, {3, 10}}, {{3, 1}, {4, 5}},         {{2, 1}, {2, 5}, {2, 7}},  {{4, 1}, {4, 3}},
      {{2, 3}, {2, 1}, {3, 10}}, {{6, 0}, {2, 1}}, {{3, 2}, {5, 7}},          {{2, 10}, {3, 1}},
      {{4, 1}, {1, 7}, {3, 4}},  {{5, 1}, {3, 5}, {2, 16}}, {{3, 4}, {3, 1}, {2, 0}}};
  // And 300 more of 2-3 leaves, extents 1-4, strides 0-12 (a fixed LCG).
  uint64_t seed = 12345;
  auto next = [&seed](int64_t below) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(below));
  };
  for (int i = 0; i < 300; ++i) {
    std::vector<LeafMode> m;
    for (int64_t k = 0, leaves = 2 + next(2); k < leaves; ++k) m.push_back({1 + next(4), next(13)});
    modes.push_back(m);
  }
  int even = 0, uneven = 0, beyond_runs = 0;
  for (const auto& m : modes) {
    const int64_t size = sw::size_of(m);
    const std::vector<int64_t> all = sw::coordinate_indices(m);
    for (int64_t start = 0; start < size; ++start)
      for (int64_t step = 1; step <= size; ++step)
        for (int64_t n = 1; start + (n - 1) * step < size; ++n) {
          int64_t want = 0, got = 0;
          const bool expect = evenly_spaced(all, start, step, n, &want);
          const bool is = sw::range_spacing(m, start, step, n, &got);
          ASSERT_EQ(is, expect) << "mode #" << (&m - modes.data()) << " start " << start << " step " << step
                                << " n " << n;
          if (!expect) {
            ++uneven;
            continue;
          }
          ++even;
          ASSERT_EQ(got, want) << "start " << start << " step " << step << " n " << n;
          std::vector<LeafMode> runs;
          if (n > 2 && !sw::range_leaves(m, start, step, n, &runs)) ++beyond_runs;
        }
  }
  EXPECT_GT(even, 500);
  EXPECT_GT(uneven, 100);
  EXPECT_GT(beyond_runs, 0);  // progressions of 3+ that are not runs of the leaves exist: (2, 2, 2):(1, 5, 7)
}

TEST(LayoutSliceSpacing, TwoPointsOnAHierarchicalModeAreOneLeaf) {
  sw::SliceResult r;
  sw::SliceError e;
  // h[0:6:3, 0]: ordinals 0 and 3 of (2, 3):(1, 10) are offsets 0 and 11.
  std::vector<SlicePart> key = {SlicePart::range(0, 6, 3), SlicePart::at(0)};
  ASSERT_EQ(sw::slice_layout(kH, key, &r, &e), SliceStatus::Ok);
  EXPECT_EQ(r.offset, 0);
  EXPECT_EQ(r.layout, Layout(N({L(2)}), N({L(11)})));
  // h[::5, 0]: ordinals 0 and 5 are offsets 0 and 21.
  key = {SlicePart::range(INT64_MIN, INT64_MAX, 5), SlicePart::at(0)};
  ASSERT_EQ(sw::slice_layout(kH, key, &r, &e), SliceStatus::Ok);
  EXPECT_EQ(r.layout, Layout(N({L(2)}), N({L(21)})));
  // h[1:6:2, 1]: ordinals 1, 3, 5 are offsets 1, 11, 21: evenly spaced by 10.
  key = {SlicePart::range(1, 6, 2), SlicePart::at(1)};
  ASSERT_EQ(sw::slice_layout(kH, key, &r, &e), SliceStatus::Ok);
  EXPECT_EQ(r.offset, 1 + 30);
  EXPECT_EQ(r.layout, Layout(N({L(3)}), N({L(10)})));
}

TEST(LayoutSliceSpacing, ProgressionsBeyondRunsOfTheLeaves) {
  // (2, 2, 2):(1, 5, 7): ordinals 3, 4, 5 are offsets 6, 7, 8.
  const Layout l(N({N({L(2), L(2), L(2)})}), N({N({L(1), L(5), L(7)})}));
  sw::SliceResult r;
  sw::SliceError e;
  std::vector<SlicePart> key = {SlicePart::range(3, 6)};
  ASSERT_EQ(sw::slice_layout(l, key, &r, &e), SliceStatus::Ok);
  EXPECT_EQ(r.offset, 6);
  EXPECT_EQ(r.layout, Layout(N({L(3)}), N({L(1)})));
}

TEST(LayoutSliceSpacing, UnevenAndFallingOffsetsAreRefused) {
  sw::SliceResult r;
  sw::SliceError e;
  // Ordinals 0, 1, 2 of (2, 3):(1, 10): offsets 0, 1, 10.
  std::vector<SlicePart> key = {SlicePart::range(0, 3)};
  ASSERT_EQ(sw::slice_layout(kH, key, &r, &e), SliceStatus::Inexpressible);
  EXPECT_EQ(e.value, 0);
  EXPECT_EQ(e.extent, 3);
  // (2, 3):(10, 1): ordinals 1, 2 are offsets 10, 1: evenly spaced, but falling.
  const Layout down(N({N({L(2), L(3)})}), N({N({L(10), L(1)})}));
  key = {SlicePart::range(1, 3)};
  ASSERT_EQ(sw::slice_layout(down, key, &r, &e), SliceStatus::Decreasing);
  EXPECT_EQ(e.spacing, -9);
  EXPECT_EQ(e.mode, std::vector<size_t>{0});
}

TEST(LayoutSliceSpacing, LongRangesAreDecidedWithoutEnumeration) {
  // A mode of 2**62 ordinals: the progression tests follow the leaves, not the elements.
  const std::vector<LeafMode> m = {{int64_t{1} << 31, 1}, {int64_t{1} << 31, (int64_t{1} << 31) + 3}};
  int64_t spacing = 0;
  EXPECT_TRUE(sw::range_spacing(m, 5, int64_t{1} << 31, int64_t{1} << 30, &spacing));  // one column
  EXPECT_EQ(spacing, (int64_t{1} << 31) + 3);
  EXPECT_FALSE(sw::range_spacing(m, 0, 3, int64_t{1} << 40, &spacing));  // crosses rows
}

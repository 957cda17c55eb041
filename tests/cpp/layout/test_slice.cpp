// Slicing a layout (csrc/engine/layout/slice.hpp): views of basic indexing.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "layout/algebra.hpp"
#include "layout/slice.hpp"
#include "layout/tree_rules.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using swtest::layout;
using sw::Layout;
using sw::SlicePart;
using sw::SliceStatus;

namespace {

struct Out {
  SliceStatus status;
  sw::SliceResult r;
  sw::SliceError e;
};

Out slice(const Layout& l, std::vector<SlicePart> key) {
  Out o;
  o.status = sw::slice_layout(l, key, &o.r, &o.e);
  return o;
}

// Index of every coordinate, first mode fastest.
std::vector<int64_t> indices(const Layout& l, int64_t offset = 0) {
  std::vector<int64_t> v;
  for (int64_t k = 0; k < l.size(); ++k) v.push_back(offset + l.index_of_ordinal(k));
  return v;
}

// Row-major 2x3 (what strideweave.tensor gives a 2x3 array).
const Layout kRowMajor = layout({2, 3}, {3, 1});

}  // namespace

TEST(LayoutSlice, IntDropsTheModeAndMovesTheOffset) {
  Out o = slice(kRowMajor, {SlicePart::at(1), SlicePart::all()});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 3);
  EXPECT_EQ(o.r.layout, layout({3}, {1}));  // row 1
  o = slice(kRowMajor, {SlicePart::all(), SlicePart::at(2)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 2);
  EXPECT_EQ(o.r.layout, layout({2}, {3}));  // column 2
}

TEST(LayoutSlice, NegativeIndexCountsFromTheEnd) {
  Out o = slice(kRowMajor, {SlicePart::at(-1)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 3);
  EXPECT_EQ(o.r.layout, layout({3}, {1}));
}

TEST(LayoutSlice, IndexOutOfRangeNamesTheModeAndItsSize) {
  Out o = slice(kRowMajor, {SlicePart::all(), SlicePart::at(3)});
  ASSERT_EQ(o.status, SliceStatus::IndexOutOfRange);
  EXPECT_EQ(o.e.mode, std::vector<size_t>{1});
  EXPECT_EQ(o.e.value, 3);
  EXPECT_EQ(o.e.extent, 3);
  EXPECT_EQ(slice(kRowMajor, {SlicePart::at(-3)}).status, SliceStatus::IndexOutOfRange);
}

TEST(LayoutSlice, RangeOnALeafScalesTheStride) {
  const Layout l = layout({10}, {2});
  Out o = slice(l, {SlicePart::range(1, 8, 3)});  // 1, 4, 7
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 2);
  EXPECT_EQ(o.r.layout, layout({3}, {6}));
  o = slice(l, {SlicePart::range(-3, INT64_MAX)});  // the last three
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 14);
  EXPECT_EQ(o.r.layout, layout({3}, {2}));
  o = slice(l, {SlicePart::range(4, 5, 1000000)});  // one element: the stride is kept
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.layout, layout({1}, {2}));
}

TEST(LayoutSlice, RangesClampLikePythonSlices) {
  const Layout l = layout({5}, {1});
  Out o = slice(l, {SlicePart::range(-100, 100)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.layout, l);
  EXPECT_EQ(slice(l, {SlicePart::range(3, 2)}).status, SliceStatus::Empty);
  EXPECT_EQ(slice(l, {SlicePart::range(7, 9)}).status, SliceStatus::Empty);
  Out neg = slice(l, {SlicePart::range(INT64_MIN, INT64_MAX, -1)});
  EXPECT_EQ(neg.status, SliceStatus::StepNotPositive);
  EXPECT_EQ(neg.e.value, -1);
}

TEST(LayoutSlice, WholeRangeKeepsAHierarchicalMode) {
  const Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  Out o = slice(l, {SlicePart::at(1), SlicePart::all()});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 1);
  EXPECT_EQ(o.r.layout, Layout(N({N({L(3), L(4)})}), N({N({L(2), L(6)})})));
  o = slice(l, {SlicePart::all(), SlicePart::range(0, 12, 1)});  // explicit 0:12 is whole too
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.layout, l);
}

TEST(LayoutSlice, IntOnAHierarchicalModeIsItsOrdinal) {
  const Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  Out o = slice(l, {SlicePart::all(), SlicePart::at(11)});  // (2, 3) in the mode
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 2 * 2 + 3 * 6);
  EXPECT_EQ(o.r.layout, layout({2}, {1}));
}

TEST(LayoutSlice, ExpressibleRangesOnAHierarchicalMode) {
  // (3, 4):(1, 5): one run of 3 per row, rows 5 apart.
  const Layout l(N({N({L(3), L(4)})}), N({N({L(1), L(5)})}));
  Out o = slice(l, {SlicePart::range(1, 3)});  // inside the first row
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 1);
  EXPECT_EQ(o.r.layout, layout({2}, {1}));
  o = slice(l, {SlicePart::range(3, 9)});  // rows 1 and 2 whole
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 5);
  EXPECT_EQ(o.r.layout, Layout(N({N({L(3), L(2)})}), N({N({L(1), L(5)})})));
  o = slice(l, {SlicePart::range(1, 12, 3)});  // column 1 of every row
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 1);
  EXPECT_EQ(o.r.layout, layout({4}, {5}));
}

TEST(LayoutSlice, InexpressibleRangeOnAHierarchicalModeIsRefused) {
  const Layout l(N({N({L(3), L(4)})}), N({N({L(1), L(5)})}));
  Out o = slice(l, {SlicePart::range(0, 4)});  // a row and a piece
  ASSERT_EQ(o.status, SliceStatus::Inexpressible);
  EXPECT_EQ(o.e.mode, std::vector<size_t>{0});
  EXPECT_EQ(slice(l, {SlicePart::range(2, 5)}).status, SliceStatus::Inexpressible);  // crosses a row
  EXPECT_EQ(slice(l, {SlicePart::range(0, 12, 2)}).status, SliceStatus::Inexpressible);
}

TEST(LayoutSlice, ContiguousHierarchyCoalescesBeforeARange) {
  // (3, 4):(1, 3) is one run of 12: every step is expressible.
  const Layout l(N({N({L(3), L(4)})}), N({N({L(1), L(3)})}));
  Out o = slice(l, {SlicePart::range(1, 12, 2)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 1);
  EXPECT_EQ(o.r.layout, layout({6}, {2}));
}

TEST(LayoutSlice, EllipsisFillsTheModesNoPartAddresses) {
  const Layout l = layout({2, 3, 4}, {12, 4, 1});
  Out o = slice(l, {SlicePart::ellipsis(), SlicePart::at(1)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 1);
  EXPECT_EQ(o.r.layout, layout({2, 3}, {12, 4}));
  o = slice(l, {SlicePart::at(1), SlicePart::ellipsis(), SlicePart::at(2)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 14);
  EXPECT_EQ(o.r.layout, layout({3}, {4}));
  o = slice(l, {SlicePart::ellipsis()});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.layout, l);
  EXPECT_EQ(slice(l, {SlicePart::ellipsis(), SlicePart::ellipsis()}).status, SliceStatus::TwoEllipses);
}

TEST(LayoutSlice, TooManyPartsIsRefused) {
  Out o = slice(kRowMajor, {SlicePart::all(), SlicePart::all(), SlicePart::all()});
  ASSERT_EQ(o.status, SliceStatus::TooManyParts);
  EXPECT_EQ(o.e.value, 3);
  EXPECT_EQ(o.e.extent, 2);
}

TEST(LayoutSlice, NewAxisInsertsAUnitMode) {
  Out o = slice(layout({3}, {1}), {SlicePart::new_axis(), SlicePart::ellipsis()});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.layout, layout({1, 3}, {0, 1}));
  EXPECT_EQ(o.r.offset, 0);
}

TEST(LayoutSlice, RankZeroResultFromAllIndices) {
  Out o = slice(kRowMajor, {SlicePart::at(1), SlicePart::at(2), SlicePart::ellipsis()});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 5);
  EXPECT_EQ(o.r.layout.shape().children.size(), 0u);
  EXPECT_EQ(o.r.layout.size(), 1);
}

TEST(LayoutSlice, NestedPartsSliceInsideAMode) {
  const Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  Out o = slice(l, {SlicePart::all(), SlicePart::of({SlicePart::at(1), SlicePart::range(1, 3)})});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  EXPECT_EQ(o.r.offset, 2 + 6);
  EXPECT_EQ(o.r.layout, Layout(N({L(2), N({L(2)})}), N({L(1), N({L(6)})})));
  o = slice(l, {SlicePart::all(), SlicePart::of({SlicePart::at(1), SlicePart::at(3)})});
  ASSERT_EQ(o.status, SliceStatus::Ok);  // every child indexed: the mode goes
  EXPECT_EQ(o.r.layout, layout({2}, {1}));
  EXPECT_EQ(slice(l, {SlicePart::of({SlicePart::all()})}).status, SliceStatus::NestedOnLeaf);
  Out arity = slice(l, {SlicePart::all(), SlicePart::of({SlicePart::all()})});
  ASSERT_EQ(arity.status, SliceStatus::NestedArity);
  EXPECT_EQ(arity.e.value, 1);
  EXPECT_EQ(arity.e.extent, 2);
  Out deep = slice(l, {SlicePart::all(), SlicePart::of({SlicePart::all(), SlicePart::at(9)})});
  ASSERT_EQ(deep.status, SliceStatus::IndexOutOfRange);
  EXPECT_EQ(deep.e.mode, (std::vector<size_t>{1, 1}));
  EXPECT_EQ(slice(l, {SlicePart::all(), SlicePart::of({SlicePart::ellipsis(), SlicePart::all()})}).status,
            SliceStatus::NotAllowedNested);
}

// Every range of a few hierarchical modes: an accepted one selects exactly
// the indices the range's ordinals have in the mode (brute force).
TEST(LayoutSlice, RangeLeavesAgreeWithEnumeration) {
  const std::vector<std::vector<sw::LeafMode>> modes = {
      {{3, 1}, {4, 5}}, {{2, 1}, {3, 2}}, {{2, 3}, {2, 1}, {3, 10}}, {{4, 1}, {1, 7}, {3, 4}}, {{6, 0}, {2, 1}}};
  int accepted = 0, refused = 0;
  for (const auto& m : modes) {
    const int64_t size = sw::size_of(m);
    const std::vector<int64_t> all = sw::coordinate_indices(m);
    for (int64_t start = 0; start < size; ++start)
      for (int64_t step = 1; step <= size; ++step)
        for (int64_t n = 2; start + (n - 1) * step < size; ++n) {
          std::vector<sw::LeafMode> out;
          if (!sw::range_leaves(m, start, step, n, &out)) {
            ++refused;
            continue;
          }
          ++accepted;
          std::vector<int64_t> got = sw::coordinate_indices(out);
          ASSERT_EQ(static_cast<int64_t>(got.size()), n);
          for (int64_t k = 0; k < n; ++k)
            ASSERT_EQ(all[static_cast<size_t>(start) + static_cast<size_t>(k * step)], all[static_cast<size_t>(start)] + got[static_cast<size_t>(k)])
                << "start " << start << " step " << step << " n " << n;
        }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 10);
}

TEST(LayoutSlice, SlicedIndicesAreTheSelectedCoordinates) {
  const Layout l = layout({4, 5}, {5, 1});
  Out o = slice(l, {SlicePart::range(1, 4, 2), SlicePart::range(0, 5, 2)});
  ASSERT_EQ(o.status, SliceStatus::Ok);
  // rows 1, 3 and columns 0, 2, 4; first mode fastest.
  EXPECT_EQ(indices(o.r.layout, o.r.offset), (std::vector<int64_t>{5, 15, 7, 17, 9, 19}));
}

// The allocation-free flat case gives what slice_layout gives, and leaves
// everything else to it.
TEST(LayoutSlice, FlatSliceAgreesWithSliceLayout) {
  const Layout l = layout({4, 5, 3}, {15, 3, 1});
  const std::vector<std::vector<SlicePart>> keys = {
      {SlicePart::at(1), SlicePart::all()},
      {SlicePart::range(1, 4, 2), SlicePart::ellipsis(), SlicePart::at(-1)},
      {SlicePart::new_axis(), SlicePart::range(INT64_MIN, INT64_MAX, 3)},
      {SlicePart::at(0), SlicePart::at(1), SlicePart::at(2)},
  };
  for (const auto& key : keys) {
    sw::FlatSlice f;
    sw::SliceError e;
    ASSERT_EQ(sw::slice_flat(l, key, &f, &e), SliceStatus::Ok);
    Out o = slice(l, key);
    ASSERT_EQ(o.status, SliceStatus::Ok);
    EXPECT_EQ(f.offset, o.r.offset);
    EXPECT_EQ(std::vector<sw::LeafMode>(f.leaves, f.leaves + f.n), o.r.layout.leaves());
    EXPECT_EQ(Layout::flat(std::vector<sw::LeafMode>(f.leaves, f.leaves + f.n)), o.r.layout);
  }
  sw::FlatSlice f;
  sw::SliceError e;
  EXPECT_EQ(sw::slice_flat(l, std::vector<SlicePart>{SlicePart::at(9)}, &f, &e), SliceStatus::IndexOutOfRange);
  EXPECT_EQ(e.mode, std::vector<size_t>{0});
  // Not its case: nested parts, hierarchical modes, key-level errors.
  const Layout h(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  EXPECT_EQ(sw::slice_flat(h, std::vector<SlicePart>{SlicePart::all()}, &f, &e), SliceStatus::NotFlat);
  EXPECT_EQ(sw::slice_flat(l, std::vector<SlicePart>{SlicePart::of({SlicePart::all()})}, &f, &e),
            SliceStatus::NotFlat);
  EXPECT_EQ(sw::slice_flat(l, std::vector<SlicePart>{SlicePart::ellipsis(), SlicePart::ellipsis()}, &f, &e),
            SliceStatus::NotFlat);
}

TEST(LayoutSlice, FlatLayoutFromLeaves) {
  const Layout f = Layout::flat({{2, 3}, {3, 1}});
  EXPECT_EQ(f, layout({2, 3}, {3, 1}));
  EXPECT_EQ(f.size(), 6);
  EXPECT_EQ(f.cosize(), 6);
  EXPECT_EQ(Layout::flat({}).size(), 1);
  EXPECT_EQ(Layout::flat({{0, 1}}).size(), 0);  // extent 0: an empty layout (zero-size imports)
  EXPECT_THROW(Layout::flat({{-1, 1}}), std::invalid_argument);
  EXPECT_THROW(Layout::flat({{2, -1}}), std::invalid_argument);
}

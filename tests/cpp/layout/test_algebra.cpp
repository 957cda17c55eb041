// GoogleTest for the layout algebra free functions (layout/algebra.hpp):
// compact, coalesce, broadcast_shapes, reduction_leaves, gradient_layout,
// cotangent_fit and the small leaf-list helpers.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "layout/algebra.hpp"
#include "layout/layout.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::Layout;
using sw::LeafMode;
using Leaves = std::vector<LeafMode>;

namespace {

std::vector<int64_t> all_indices(const Layout& l) {
  std::vector<int64_t> out;
  for (int64_t o = 0; o < l.size(); ++o) out.push_back(l.index_of_ordinal(o));
  return out;
}

}  // namespace

TEST(Compact, TreeAndLeafFormsAgree) {
  Layout c = sw::compact(N({L(2), N({L(3), L(4)}), L(5)}));
  EXPECT_EQ(c.stride(), N({L(1), N({L(2), L(6)}), L(24)}));
  EXPECT_EQ(sw::compact(Leaves{{2, 9}, {3, 0}, {4, 1}}), (Leaves{{2, 1}, {3, 2}, {4, 6}}));
  EXPECT_EQ(sw::compact(Leaves{}), Leaves{});
  EXPECT_EQ(c.leaves(), sw::compact(c.leaves()));
  // Layout::canonical is the same builder.
  EXPECT_EQ(Layout::canonical(N({L(2), N({L(3), L(4)}), L(5)})), c);
  // The compact layout's index equals the ordinal.
  auto idx = all_indices(c);
  for (size_t k = 0; k < idx.size(); ++k) EXPECT_EQ(idx[k], static_cast<int64_t>(k));
}

TEST(Compact, RejectsLeafRootBadExtentAndOverflow) {
  EXPECT_THROW(sw::compact(L(3)), std::invalid_argument);
  EXPECT_THROW(sw::compact(N({L(-1)})), std::invalid_argument);
  EXPECT_EQ(sw::compact(N({L(0)})).size(), 0);  // a zero-size import's shape
  const int64_t big = int64_t{1} << 40;
  EXPECT_THROW(sw::compact(N({L(big), L(big), L(2)})), std::invalid_argument);
  EXPECT_EQ(sw::compact(N({})), Layout(N({}), N({})));
}

TEST(Coalesce, MergesContiguousAndDropsExtentOne) {
  // ((2,3),1,4):((1,2),7,6) is one run of 24.
  Layout l(N({N({L(2), L(3)}), L(1), L(4)}), N({N({L(1), L(2)}), L(7), L(6)}));
  Layout c = sw::coalesce(l);
  EXPECT_EQ(c.shape(), N({L(24)}));
  EXPECT_EQ(c.stride(), N({L(1)}));
  // Gapped: (2,3):(1,4) stays two modes.
  Layout g(N({L(2), L(3)}), N({L(1), L(4)}));
  EXPECT_EQ(sw::coalesce(g), g);
  // Broadcast modes merge with each other: (2,3):(0,0) -> (6):(0).
  Layout b(N({L(2), L(3)}), N({L(0), L(0)}));
  EXPECT_EQ(sw::coalesce(b), Layout(N({L(6)}), N({L(0)})));
  // Size 1 coalesces to rank 0.
  EXPECT_EQ(sw::coalesce(Layout(N({L(1), N({L(1)})}), N({L(3), N({L(5)})}))), Layout(N({}), N({})));
  EXPECT_THROW(sw::coalesce(Leaves{{2, 1}, {0, 2}}), std::invalid_argument);
}

TEST(Coalesce, KeepsSizeAndIndexFunctionOnRandomLayouts) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 5);
    std::vector<IntTree> se, ss;
    int64_t running = 1;
    for (int k = 0; k < n; ++k) {
      const int64_t e = 1 + static_cast<int64_t>(rng() % 4);
      int64_t s;
      switch (rng() % 4) {
        case 0: s = running; break;           // contiguous
        case 1: s = 0; break;                 // broadcast
        case 2: s = running * 2; break;       // gapped
        default: s = 1 + static_cast<int64_t>(rng() % 7);
      }
      running = std::max<int64_t>(running, s) * e;
      se.push_back(L(e));
      ss.push_back(L(s));
    }
    Layout l(N(se), N(ss));
    Layout c = sw::coalesce(l);
    EXPECT_EQ(c.size(), l.size());
    EXPECT_EQ(c.cosize(), l.cosize());
    EXPECT_EQ(all_indices(c), all_indices(l));
    EXPECT_LE(c.leaves().size(), l.leaves().size());
    for (const LeafMode& m : c.leaves()) EXPECT_GT(m.extent, 1);
    EXPECT_EQ(sw::coalesce(c), c);  // idempotent
  }
}

TEST(LeafHelpers, StrideZeroSizeAndIndices) {
  EXPECT_TRUE(sw::has_stride_zero(Leaves{{2, 1}, {3, 0}}));
  EXPECT_FALSE(sw::has_stride_zero(Leaves{{2, 1}, {1, 0}}));
  EXPECT_EQ(sw::size_of(Leaves{{2, 1}, {3, 0}}), 6);
  EXPECT_EQ(sw::size_of(Leaves{}), 1);
  EXPECT_EQ(sw::coordinate_indices(Leaves{{2, 3}, {2, 1}}), (std::vector<int64_t>{0, 3, 1, 4}));
  EXPECT_EQ(sw::coordinate_indices(Leaves{}), (std::vector<int64_t>{0}));
  EXPECT_EQ(sw::broadcast_one(Leaves{{2, 1}, {3, 5}}), (Leaves{{2, 0}, {3, 0}}));
  EXPECT_EQ(sw::coordinate_indices(sw::broadcast_one(Leaves{{2, 1}, {3, 5}})), std::vector<int64_t>(6, 0));
}

TEST(BroadcastShapes, WidensExtentOneLeaves) {
  EXPECT_EQ(sw::broadcast_shapes(N({L(2), N({L(1), L(4)})}), N({L(1), N({L(3), L(4)})})),
            N({L(2), N({L(3), L(4)})}));
  EXPECT_EQ(sw::broadcast_shapes(N({}), N({})), N({}));
  EXPECT_EQ(sw::broadcast_shapes(N({L(1)}), N({L(1)})), N({L(1)}));
}

TEST(BroadcastShapes, NamesTheDisagreement) {
  EXPECT_NE(swtest::invalid_argument_message([] { sw::broadcast_shapes(N({L(2)}), N({L(3)})); }).find("extents 2 and 3 differ"),
            std::string::npos);
  EXPECT_NE(swtest::invalid_argument_message([] { sw::broadcast_shapes(N({L(2)}), N({L(2), L(1)})); }).find("different ranks (1 and 2)"),
            std::string::npos);
  EXPECT_NE(swtest::invalid_argument_message([] { sw::broadcast_shapes(N({L(2)}), N({N({L(2)})})); }).find("a leaf faces a nested mode"),
            std::string::npos);
}

TEST(ReductionLeaves, StrideZeroOnBroadcastLeaves) {
  Layout g = sw::compact(N({L(2), N({L(3), L(4)})}));
  Layout x(N({L(2), N({L(1), L(4)})}), N({L(5), N({L(0), L(1)})}));  // gapped, extent-1 middle
  Layout target = sw::gradient_layout(x);
  EXPECT_EQ(target, x);  // injective: its own layout
  EXPECT_EQ(sw::reduction_leaves(g, x, target), (Leaves{{2, 5}, {3, 0}, {4, 1}}));
  // Same shape: a plain relayout onto the target's strides.
  EXPECT_EQ(sw::reduction_leaves(g, g, g), g.leaves());
}

TEST(ReductionLeaves, RejectsShapesThatCannotHaveBroadcast) {
  Layout g = sw::compact(N({L(2), L(3)}));
  Layout x = sw::compact(N({L(2), L(2)}));
  Layout nested = sw::compact(N({L(2), N({L(3)})}));
  const std::string want = "the gradient's shape does not match the input's shape";
  EXPECT_EQ(swtest::invalid_argument_message([&] { sw::reduction_leaves(g, x, x); }), want);
  EXPECT_EQ(swtest::invalid_argument_message([&] { sw::reduction_leaves(g, nested, nested); }), want);
  Layout rank1 = sw::compact(N({L(6)}));
  EXPECT_EQ(swtest::invalid_argument_message([&] { sw::reduction_leaves(g, rank1, rank1); }), want);
}

TEST(GradientLayout, OwnWhenInjectiveElseCompact) {
  Layout gapped(N({L(2), L(3)}), N({L(1), L(4)}));
  EXPECT_EQ(sw::gradient_layout(gapped), gapped);
  Layout transposed(N({L(2), L(3)}), N({L(3), L(1)}));
  EXPECT_EQ(sw::gradient_layout(transposed), transposed);
  Layout broadcast(N({L(2), N({L(3), L(2)})}), N({L(1), N({L(0), L(2)})}));
  EXPECT_EQ(sw::gradient_layout(broadcast), sw::compact(broadcast.shape()));
  Layout overlap(N({L(3), L(3)}), N({L(1), L(1)}));  // indices repeat without stride 0
  EXPECT_EQ(sw::gradient_layout(overlap), sw::compact(overlap.shape()));
}

TEST(CotangentFit, FollowsTheContract) {
  using sw::CotangentFit;
  Layout gapped(N({L(2), L(3)}), N({L(1), L(4)}));
  Layout compact = sw::compact(N({L(2), L(3)}));
  Layout broadcast(N({L(2), L(3)}), N({L(1), L(0)}));
  EXPECT_EQ(sw::cotangent_fit(gapped, gapped), CotangentFit::Ok);
  EXPECT_EQ(sw::cotangent_fit(gapped, compact), CotangentFit::NotOwnLayout);
  EXPECT_EQ(sw::cotangent_fit(gapped, sw::compact(N({L(3), L(2)}))), CotangentFit::ShapeDiffers);
  EXPECT_EQ(sw::cotangent_fit(broadcast, compact), CotangentFit::Ok);
  EXPECT_EQ(sw::cotangent_fit(broadcast, gapped), CotangentFit::Ok);
  EXPECT_EQ(sw::cotangent_fit(broadcast, broadcast), CotangentFit::NotInjective);
}

// ------------------------------------------------------------------ division by a tiler

namespace {

// Index of coordinate x (one flat ordinal per top-level mode) of l.
int64_t index_at(const Layout& l, const std::vector<int64_t>& x) {
  int64_t idx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const Layout mode(N({l.shape().children[i]}), N({l.stride().children[i]}));
    idx += mode.index_of_ordinal(x[i]);
  }
  return idx;
}

}  // namespace

TEST(LayoutDivide, ZippedDivideOfTheTiledCanonicalLayoutSeparatesTileAndGrid) {
  // grid (2, 3) of (2, 2) tiles, tile-major: mode i is (tile_i, grid_i)
  const Layout tiled(N({swtest::node({2, 2}), swtest::node({2, 3})}), N({swtest::node({1, 4}), swtest::node({2, 8})}));
  const Layout z = sw::zipped_divide(tiled, {2, 2});
  // every part is a node of leaves: (((2), (2)), ((2), (3))) : (((1), (2)), ((4), (8)))
  EXPECT_EQ(sw::to_string(z.shape()), "(((2,), (2,)), ((2,), (3,)))");
  EXPECT_EQ(sw::to_string(z.stride()), "(((1,), (2,)), ((4,), (8,)))");
}

TEST(LayoutDivide, ZippedDivideOfARowMajorMatrixGivesBoxes) {
  const Layout z = sw::zipped_divide(swtest::layout({4, 6}, {6, 1}), {2, 3});
  EXPECT_EQ(sw::to_string(z.shape()), "(((2,), (3,)), ((2,), (2,)))");
  EXPECT_EQ(sw::to_string(z.stride()), "(((6,), (1,)), ((12,), (3,)))");
}

TEST(LayoutDivide, LogicalDivideKeepsTheModesAndCutsALeaf) {
  // (6, 2):(1, 6) is the contiguous 12: the tile of 4 cuts it at ordinal 4
  const Layout l(N({swtest::node({6, 2})}), N({swtest::node({1, 6})}));
  const Layout d = sw::logical_divide(l, {4});
  EXPECT_EQ(d, Layout(N({N({swtest::node({4}), swtest::node({3})})}), N({N({swtest::node({1}), swtest::node({4})})})));
  // a whole mode is one tile: the rest is (1):(0)
  EXPECT_EQ(sw::logical_divide(swtest::layout({5}, {3}), {5}),
            Layout(N({N({swtest::node({5}), swtest::node({1})})}), N({N({swtest::node({3}), swtest::node({0})})})));
}

TEST(LayoutDivide, DivideLeavesNeedsALeafBoundary) {
  EXPECT_FALSE(sw::divide_leaves({{3, 2}, {2, 1}}, 2).has_value());
  auto p = sw::divide_leaves({{2, 3}, {3, 1}}, 2);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->first, (Leaves{{2, 3}}));
  EXPECT_EQ(p->second, (Leaves{{3, 1}}));
  p = sw::divide_leaves({{4, 1}}, 1);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->first, (Leaves{{1, 0}}));
  EXPECT_EQ(p->second, (Leaves{{4, 1}}));
}

TEST(LayoutDivide, RefusalsNameTheProblem) {
  EXPECT_NE(swtest::invalid_argument_message([] { sw::zipped_divide(swtest::layout({4, 6}, {6, 1}), {2}); }).find("rank"), std::string::npos);
  EXPECT_NE(swtest::invalid_argument_message([] { sw::zipped_divide(swtest::layout({4, 6}, {6, 1}), {3, 3}); }).find("does not divide mode 0"),
            std::string::npos);
  const Layout l(N({swtest::node({3, 2})}), N({swtest::node({2, 1})}));
  EXPECT_NE(swtest::invalid_argument_message([&] { sw::logical_divide(l, {2}); }).find("no leaf boundary"), std::string::npos);
}

TEST(LayoutDivide, EveryCoordinateKeepsItsIndex) {
  // Random two-mode layouts: wherever the division exists, index(tile y,
  // tile q) of the result is the original index of x_i = q_i * n_i + y_i.
  std::mt19937 rng(7);
  int divided = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<IntTree> shape, stride;
    std::vector<int64_t> tiler, sizes;
    for (int i = 0; i < 2; ++i) {
      const int leaves = 1 + static_cast<int>(rng() % 3);
      std::vector<int64_t> e, s;
      int64_t size = 1;
      for (int j = 0; j < leaves; ++j) {
        e.push_back(1 + static_cast<int64_t>(rng() % 4));
        s.push_back(static_cast<int64_t>(rng() % 13));
        size *= e.back();
      }
      shape.push_back(swtest::node(e));
      stride.push_back(swtest::node(s));
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= size; ++d)
        if (size % d == 0) divisors.push_back(d);
      tiler.push_back(divisors[rng() % divisors.size()]);
      sizes.push_back(size);
    }
    const Layout l(N(shape), N(stride));
    Layout z;
    try {
      z = sw::zipped_divide(l, tiler);
    } catch (const std::invalid_argument&) {
      continue;
    }
    ++divided;
    const Layout within(N({z.shape().children[0]}), N({z.stride().children[0]}));
    const Layout across(N({z.shape().children[1]}), N({z.stride().children[1]}));
    const std::vector<int64_t> grid = {sizes[0] / tiler[0], sizes[1] / tiler[1]};
    for (int64_t q1 = 0; q1 < grid[1]; ++q1)
      for (int64_t q0 = 0; q0 < grid[0]; ++q0)
        for (int64_t y1 = 0; y1 < tiler[1]; ++y1)
          for (int64_t y0 = 0; y0 < tiler[0]; ++y0)
            ASSERT_EQ(index_at(within, {y0 + tiler[0] * y1}) + index_at(across, {q0 + grid[0] * q1}),
                      index_at(l, {q0 * tiler[0] + y0, q1 * tiler[1] + y1}))
                << round;
  }
  EXPECT_GT(divided, 100);
}

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "layout/algebra.hpp"
#include "layout/layout.hpp"
#include "tiled/tile_split.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::Layout;
using sw::LeafMode;

namespace {

// Brute force: operand op's index of the coordinate at tile k, within-tile
// ordinal w, from the layout itself.
int64_t brute(const Layout& l, const std::vector<int64_t>& tile, const std::vector<int64_t>& grid, int64_t k,
              int64_t w) {
  // per-mode flat ordinal: tile coord * tile + within coord; then colex over modes
  int64_t ordinal = 0, scale = 1;
  for (size_t i = 0; i < tile.size(); ++i) {
    const int64_t x = (k % grid[i]) * tile[i] + (w % tile[i]);
    k /= grid[i];
    w /= tile[i];
    ordinal += x * scale;
    scale *= tile[i] * grid[i];
  }
  return l.index_of_ordinal(ordinal);
}

void expect_matches(const std::vector<const Layout*>& ls, const std::vector<int64_t>& tile,
                    const std::vector<int64_t>& grid) {
  auto s = sw::split_tiles(ls, tile, grid);
  ASSERT_TRUE(s.has_value());
  int64_t T = 1, G = 1;
  for (size_t i = 0; i < tile.size(); ++i) T *= tile[i], G *= grid[i];
  ASSERT_EQ(static_cast<int64_t>(s->offsets.size()), G);
  for (size_t op = 0; op < ls.size(); ++op) {
    std::vector<int64_t> within = sw::coordinate_indices(s->leaves[op]);
    ASSERT_EQ(static_cast<int64_t>(within.size()), T);
    for (int64_t k = 0; k < G; ++k)
      for (int64_t w = 0; w < T; ++w)
        ASSERT_EQ(s->offsets[k][op] + within[w], brute(*ls[op], tile, grid, k, w)) << op << " " << k << " " << w;
  }
}

}  // namespace

TEST(TileSplit, CanonicalTiledLayoutAndCompactOutput) {
  // grid (3,2), tile (2,2): mode i is (tile, grid)
  Layout te(N({N({L(2), L(3)}), N({L(2), L(2)})}), N({N({L(1), L(4)}), N({L(2), L(12)})}));
  Layout out = sw::compact(te.shape());
  Layout bc = Layout(N({N({L(1), L(1)}), N({L(1), L(1)})}), N({N({L(0), L(0)}), N({L(0), L(0)})}))
                  .broadcast_to(te.shape());
  expect_matches({&te, &out, &bc}, {2, 2}, {3, 2});
  auto s = sw::split_tiles({&te}, {2, 2}, {3, 2});
  // tile k of the canonical layout starts at k * 4
  for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(s->offsets[k][0], k * 4);
  EXPECT_EQ(sw::leaf_reach(s->leaves[0]), std::make_pair(int64_t{0}, int64_t{3}));
}

TEST(TileSplit, FlatModesSplitOneLeaf) {
  // mode extents 6 and 4 as single leaves, tiles of (2, 2): each leaf is cut in two
  Layout a(N({L(6), L(4)}), N({L(1), L(6)}));
  Layout b(N({L(6), L(4)}), N({L(4), L(1)}));
  expect_matches({&a, &b}, {2, 2}, {3, 2});
  expect_matches({&a}, {6, 1}, {1, 4});
  expect_matches({&a}, {1, 1}, {6, 4});
}

TEST(TileSplit, NestedModesSplitAfterSeveralLeaves) {
  Layout a(N({N({L(2), L(3), L(2)}), L(2)}), N({N({L(1), L(2), L(6)}), L(12)}));
  expect_matches({&a}, {6, 2}, {2, 1});
  expect_matches({&a}, {2, 1}, {6, 2});
}

TEST(TileSplit, NoSplitWhenLeavesDoNotAlign) {
  // tile extent 4 over leaves (6): 6 % 4 != 0; tile 4 over (2, 3, 2): 2 * 3 passes 4
  Layout a(N({L(6)}), N({L(1)}));
  EXPECT_FALSE(sw::split_tiles({&a}, {4}, {1}).has_value());  // size 6 != 4 * 1
  Layout b(N({N({L(2), L(3), L(2)})}), N({N({L(1), L(2), L(6)})}));
  EXPECT_FALSE(sw::split_tiles({&b}, {4}, {3}).has_value());
  EXPECT_FALSE(sw::split_tiles({&b}, {2}, {5}).has_value());  // 12 != 10
  EXPECT_TRUE(sw::split_tiles({&b}, {2}, {6}).has_value());
}

TEST(TileSplit, MismatchedShapesThrow) {
  Layout a(N({L(4)}), N({L(1)}));
  Layout b(N({L(2)}), N({L(1)}));
  EXPECT_THROW(sw::split_tiles({&a, &b}, {2}, {2}), std::invalid_argument);
  EXPECT_THROW(sw::split_tiles({&a}, {2, 1}, {2}), std::invalid_argument);
}

TEST(TileSplit, ReachCountsNegativeStrides) {
  std::vector<LeafMode> l{{3, -2}, {2, 5}};
  EXPECT_EQ(sw::leaf_reach(l), std::make_pair(int64_t{-4}, int64_t{5}));
}

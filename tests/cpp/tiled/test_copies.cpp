// GoogleTest for tile copy planning (tiled/copies.hpp): tier runs of each
// geometry, the common refinement of two associations, and logical tile
// copies cut into runs, checked coordinate by coordinate.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "tiled/copies.hpp"
#include "builders.hpp"

using sw::LeafMode;
using sw::tiled::Geometry;
using sw::tiled::GeometryKind;
using sw::tiled::Leaves;
using sw::tiled::ModeLeaves;
using sw::tiled::refine;
using Runs = std::vector<sw::tiled::Run>;
using sw::tiled::TileCopy;
using sw::tiled::TilePlace;
using sw::tiled::index_of;

namespace {

// dst slot -> src slot for every coordinate of a tile of the given extents.
std::map<int64_t, int64_t> expected(const ModeLeaves& src, int64_t sb, const ModeLeaves& dst, int64_t db,
                                    const std::vector<int64_t>& tile) {
  std::map<int64_t, int64_t> m;
  int64_t n = 1;
  for (int64_t e : tile) n *= e;
  for (int64_t o = 0; o < n; ++o) {
    int64_t r = o, s = sb, d = db;
    for (size_t i = 0; i < tile.size(); ++i) {
      s += index_of(src[i], r % tile[i]);
      d += index_of(dst[i], r % tile[i]);
      r /= tile[i];
    }
    m[d] = s;
  }
  return m;
}

}  // namespace

TEST(TiledCopies, TierRunsOfEachGeometry) {
  const Geometry tiles(GeometryKind::Tiles, {4}, {8});
  EXPECT_EQ(sw::tiled::tile_runs(tiles, {16, false}, {0, true}), (Runs{{16, 0, 8}}));
  const Geometry box(GeometryKind::RowMajor, {2, 2}, {2, 3});  // a (4, 6) matrix
  // tile (1, 1): rows 2-3, columns 3-5 -> two runs of 3 into a packed buffer
  EXPECT_EQ(sw::tiled::tile_runs(box, {box.base(3), false}, {0, true}), (Runs{{15, 0, 3}, {21, 3, 3}}));
  // slab -> secondary: the same offsets
  EXPECT_EQ(sw::tiled::tile_runs(box, {15, false}, {15, false}), (Runs{{15, 15, 3}, {21, 21, 3}}));
  // packed -> packed: one run
  EXPECT_EQ(sw::tiled::tile_runs(box, {0, true}, {6, true}), (Runs{{0, 6, 6}}));
  // full-width boxes merge into one run
  const Geometry rows(GeometryKind::RowMajor, {2, 1}, {2, 6});
  EXPECT_EQ(sw::tiled::tile_runs(rows, {12, false}, {0, true}), (Runs{{12, 0, 12}}));
}

TEST(TiledCopies, RefineCutsAtEveryBoundary) {
  auto r = refine({{6, 1}}, {{2, 10}, {3, 20}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, (Leaves{{2, 1}, {3, 2}}));
  EXPECT_EQ(r->second, (Leaves{{2, 10}, {3, 20}}));
  r = refine({{1, 0}, {4, 1}}, {{4, 3}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, (Leaves{{4, 1}}));
  EXPECT_FALSE(refine({{6, 1}, {2, 6}}, {{4, 1}, {3, 4}}));
  EXPECT_FALSE(refine({{6, 1}}, {{4, 1}}));  // different sizes
}

TEST(TiledCopies, ACanonicalTileIsOneRun) {
  const Geometry g(GeometryKind::Tiles, {3}, {8});
  auto c = TileCopy::plan(g.within(), g.base(2), {{{8, 1}}}, 8);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->run(), 8);
  EXPECT_TRUE(c->same_layout());
  EXPECT_EQ(c->runs_list(), (Runs{{16, 8, 8}}));
}

TEST(TiledCopies, ATransposedTileIsCutIntoItsRunsOrElements) {
  // a (2, 3) tile read transposed: no run longer than one slot
  const ModeLeaves src = {{{2, 3}}, {{3, 1}}};
  const ModeLeaves dst = {{{2, 1}}, {{3, 2}}};
  auto c = TileCopy::plan(src, 100, dst, 0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->run(), 1);
  EXPECT_FALSE(c->same_layout());
  std::map<int64_t, int64_t> got;
  c->for_each_run([&](int64_t s, int64_t d, int64_t n) {
    for (int64_t k = 0; k < n; ++k) got[d + k] = s + k;
  });
  EXPECT_EQ(got, expected(src, 100, dst, 0, {2, 3}));
}

TEST(TiledCopies, RandomAssociationsCopyEveryCoordinateOnce) {
  std::mt19937 rng(5);
  int planned = 0;
  for (int round = 0; round < 500; ++round) {
    const size_t rank = 1 + rng() % 3;
    std::vector<int64_t> tile;
    ModeLeaves src, dst;
    int64_t acc_s = 1 + rng() % 3, acc_d = 1;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t t = 1 + rng() % 6;
      tile.push_back(t);
      // each side: one leaf, or the extent cut in two
      auto side = [&](int64_t& acc) {
        Leaves l;
        if (t % 2 == 0 && rng() % 2) {
          l = {{2, acc}, {t / 2, acc * 2}};
        } else {
          l = {{t, acc}};
        }
        acc *= t;
        return l;
      };
      src.push_back(side(acc_s));
      dst.push_back(side(acc_d));
    }
    if (rng() % 2) std::swap(src[0], src[rank - 1]);  // permute which mode is fastest on one side
    auto c = TileCopy::plan(src, 7, dst, 3);
    if (!c) continue;
    ++planned;
    std::map<int64_t, int64_t> got;
    int64_t total = 0;
    c->for_each_run([&](int64_t s, int64_t d, int64_t n) {
      total += n;
      for (int64_t k = 0; k < n; ++k) got[d + k] = s + k;
    });
    ASSERT_EQ(total, c->size());
    ASSERT_EQ(got, expected(src, 7, dst, 3, tile)) << round;
  }
  EXPECT_GT(planned, 200);
}

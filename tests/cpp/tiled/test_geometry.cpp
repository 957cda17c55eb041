// GoogleTest for the tile geometry (tiled/geometry.hpp): the four kinds'
// footprints, packing, locate, and the tile-footprint compatibility rule
// against a brute force over every coordinate.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tiled/geometry.hpp"
#include "builders.hpp"

using sw::IntTree;
using sw::tiled::index_of;
using sw::Layout;
using sw::LeafMode;
using sw::tiled::Association;
using sw::tiled::Geometry;
using sw::tiled::GeometryKind;
using sw::tiled::Incompatible;
using sw::tiled::ModeLeaves;
using swtest::L;
using swtest::N;

namespace {

using Rule = Incompatible::Rule;

using swtest::coordinates;
using swtest::index_at;

// The footprint of tile k: slots of the geometry's own layout.
std::set<int64_t> footprint(const Geometry& g, int64_t k) {
  std::set<int64_t> s;
  const std::vector<int64_t> t = g.coordinate(k);
  for (const auto& y : coordinates(g.tile())) {
    std::vector<int64_t> x;
    for (size_t i = 0; i < y.size(); ++i) x.push_back(t[i] * g.tile()[i] + y[i]);
    s.insert(index_at(g.layout(), x));
  }
  return s;
}

// The compatibility rule by brute force: every tile reaches exactly its
// carrier footprint, no slot twice.
bool brute_compatible(const Geometry& g, const Layout& l, int64_t offset) {
  const IntTree& sh = l.shape();
  if (sh.is_leaf || sh.children.size() != g.rank()) return false;
  std::vector<int64_t> full;
  for (size_t i = 0; i < g.rank(); ++i) {
    const int64_t n = Layout(N({sh.children[i]}), N({l.stride().children[i]})).size();
    if (n != g.tile()[i] * g.grid()[i]) return false;
    full.push_back(n);
  }
  std::map<int64_t, std::vector<int64_t>> reached;
  for (const auto& x : coordinates(full)) {
    std::vector<int64_t> t;
    for (size_t i = 0; i < x.size(); ++i) t.push_back(x[i] / g.tile()[i]);
    reached[g.ordinal(t)].push_back(offset + index_at(l, x));
  }
  for (auto& [k, slots] : reached) {
    std::set<int64_t> s(slots.begin(), slots.end());
    if (s.size() != slots.size() || s != footprint(g, k)) return false;
  }
  return true;
}

Layout flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  return swtest::layout(shape, stride);
}

}  // namespace

TEST(TiledGeometry, TilesIsTheApiLayoutWithContiguousTiles) {
  const Geometry g(GeometryKind::Tiles, {2, 3}, {2, 2});
  EXPECT_EQ(sw::to_string(g.layout().shape()), "((2, 2), (2, 3))");
  EXPECT_EQ(sw::to_string(g.layout().stride()), "((1, 4), (2, 8))");
  EXPECT_TRUE(g.contiguous());
  EXPECT_EQ(g.run_count(), 1);
  for (int64_t k = 0; k < g.tiles(); ++k) EXPECT_EQ(g.base(k), k * 4);
  for (int64_t s = 0; s < g.slots(); ++s) EXPECT_EQ(g.locate(s), std::make_pair(s / 4, s % 4));
}

TEST(TiledGeometry, RowMajorExpertsAreContiguousAndDenseOnesAreStrided) {
  // 4 experts of 2 x 3 (expert, out, in), one expert per tile
  const Geometry rm(GeometryKind::RowMajor, {4, 1, 1}, {1, 2, 3});
  EXPECT_EQ(sw::to_string(rm.layout().shape()), "(4, 2, 3)");
  EXPECT_EQ(sw::to_string(rm.layout().stride()), "(6, 3, 1)");
  EXPECT_TRUE(rm.contiguous());
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(rm.base(k), 6 * k);
  const Geometry d(GeometryKind::Dense, {4, 1, 1}, {1, 2, 3});
  EXPECT_EQ(sw::to_string(d.layout().stride()), "(1, 4, 8)");
  EXPECT_FALSE(d.contiguous());
  EXPECT_EQ(d.run_length(), 1);
  EXPECT_EQ(d.run_count(), 6);
  for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(d.run_offset(j), 4 * j);
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(d.base(k), k);
  // row-major 2-D boxes: a (2, 3) tile of a (4, 6) matrix is 2 runs of 3
  const Geometry box(GeometryKind::RowMajor, {2, 2}, {2, 3});
  EXPECT_EQ(box.run_length(), 3);
  EXPECT_EQ(box.run_count(), 2);
  EXPECT_EQ(box.run_offset(1), 6);
  EXPECT_EQ(box.base(1), 12);  // tile (1, 0): rows 2-3
  EXPECT_EQ(box.base(2), 3);   // tile (0, 1): columns 3-5
}

TEST(TiledGeometry, LocatePackAndUnpackAreInverseOverEverySlot) {
  for (GeometryKind kind : {GeometryKind::Tiles, GeometryKind::Dense, GeometryKind::RowMajor}) {
    const Geometry g(kind, {3, 2, 2}, {2, 3, 1});
    std::set<int64_t> seen;
    for (int64_t k = 0; k < g.tiles(); ++k) {
      const std::set<int64_t> fp = footprint(g, k);
      std::vector<int64_t> sorted(fp.begin(), fp.end());
      for (int64_t p = 0; p < g.tile_size(); ++p) {
        const int64_t slot = g.base(k) + g.unpack(p);
        EXPECT_EQ(slot, sorted[static_cast<size_t>(p)]) << sw::tiled::to_string(kind);  // packed: slot order
        EXPECT_EQ(g.locate(slot), std::make_pair(k, p));
        EXPECT_EQ(g.pack(g.unpack(p)), p);
        seen.insert(slot);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), g.slots());
  }
}

TEST(TiledGeometry, ExplicitLayoutsAreValidatedAndDivided) {
  // a column-major-within-row-major permutation of a (4, 6) matrix
  const Layout ok(N({swtest::node({2, 2}), swtest::node({3, 2})}), N({swtest::node({1, 12}), swtest::node({2, 6})}));
  const Geometry g(GeometryKind::Explicit, {2, 2}, {2, 3}, &ok);
  EXPECT_EQ(g.layout(), ok);
  std::set<int64_t> all;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t s : footprint(g, k)) all.insert(s);
  EXPECT_EQ(all.size(), 24u);
  const auto refuse = [](const Layout& l, const std::vector<int64_t>& grid, const std::vector<int64_t>& tile) {
    try {
      Geometry(GeometryKind::Explicit, grid, tile, &l);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  EXPECT_NE(refuse(flat({24}, {1}), {2, 2}, {2, 3}).find("top-level modes"), std::string::npos);
  EXPECT_NE(refuse(flat({4, 5}, {5, 1}), {2, 2}, {2, 3}).find("coordinates"), std::string::npos);
  EXPECT_NE(refuse(flat({4, 6}, {12, 1}), {2, 2}, {2, 3}).find("compact and injective"), std::string::npos);
  const Layout crossing(N({swtest::node({4}), swtest::node({3, 2})}), N({swtest::node({1}), swtest::node({8, 4})}));
  EXPECT_NE(refuse(crossing, {2, 3}, {2, 2}).find("no leaf boundary"), std::string::npos);
}

TEST(TiledGeometry, RankAndExtentsAreValidated) {
  EXPECT_THROW(Geometry(GeometryKind::Tiles, {}, {}), std::invalid_argument);
  EXPECT_THROW(Geometry(GeometryKind::Tiles, {2}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(Geometry(GeometryKind::Tiles, {0}, {1}), std::invalid_argument);
  EXPECT_THROW(Geometry(GeometryKind::Tiles, {int64_t(1) << 40}, {int64_t(1) << 40}), std::invalid_argument);
}

TEST(TiledGeometry, EachRuleAndItsMessage) {
  const Geometry g(GeometryKind::Tiles, {2, 1}, {2, 2});
  const auto why = [&](const Layout& l, int64_t offset = 0) { return g.check(l, offset, nullptr); };
  EXPECT_EQ(why(flat({8}, {1})).rule, Rule::Rank);
  EXPECT_NE(g.message(why(flat({8}, {1}))).find("top-level modes"), std::string::npos);
  EXPECT_EQ(why(g.layout(), 1).rule, Rule::Offset);
  EXPECT_EQ(why(flat({3, 2}, {1, 3})).rule, Rule::ModeSize);
  EXPECT_NE(g.message(why(flat({3, 2}, {1, 3}))).find("mode 0 of the Tensor has 3 coordinates"), std::string::npos);
  // one logical tile spanning two carrier tiles
  const Incompatible span = why(flat({4, 2}, {1, 4}));
  EXPECT_EQ(span.rule, Rule::Remapped);
  EXPECT_NE(g.message(span).find("coordinate 1 of mode 0 reaches slots of another carrier tile"), std::string::npos);
  // a stride-0 leaf repeats a slot
  const Layout rep(N({swtest::node({2, 2}), swtest::node({2, 1})}), N({swtest::node({0, 4}), swtest::node({2, 8})}));
  EXPECT_EQ(why(rep).rule, Rule::Repeats);
  EXPECT_NE(g.message(why(rep)).find("repeats a physical slot"), std::string::npos);
  // no leaf boundary at the tile extent
  const Geometry g3(GeometryKind::Tiles, {3}, {2});
  EXPECT_EQ(g3.check(Layout(N({swtest::node({3, 2})}), N({swtest::node({2, 1})})), 0, nullptr).rule, Rule::Crosses);
  // each mode fine alone, together they alias
  const Geometry g2(GeometryKind::Tiles, {1, 1}, {2, 2});
  const Incompatible alias = g2.check(flat({2, 2}, {1, 1}), 0, nullptr);
  EXPECT_EQ(alias.rule, Rule::Aliases);
  EXPECT_NE(g2.message(alias).find("aliases physical slots or omits slots"), std::string::npos);
  // a within-tile transpose is compatible and not canonical
  Association a;
  EXPECT_FALSE(g2.check(flat({2, 2}, {2, 1}), 0, &a));
  EXPECT_FALSE(a.canonical);
  EXPECT_FALSE(g2.check(g2.layout(), 0, &a));
  EXPECT_TRUE(a.canonical);
}

TEST(TiledGeometry, CompatibilityMatchesTheBruteForce) {
  std::mt19937 rng(11);
  int compatible = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t rank = 1 + rng() % 2;
    std::vector<int64_t> grid, tile;
    for (size_t i = 0; i < rank; ++i) {
      grid.push_back(1 + rng() % 3);
      tile.push_back(1 + rng() % 3);
    }
    const GeometryKind kind = static_cast<GeometryKind>(rng() % 3);
    const Geometry g(kind, grid, tile);
    const Layout& P = g.layout();
    std::vector<IntTree> shape, stride;
    for (size_t i = 0; i < rank; ++i) {
      if (rng() % 2) {
        // the geometry's own mode, maybe with the tile part's strides
        // permuted between the modes below
        shape.push_back(P.shape().children[i]);
        stride.push_back(P.stride().children[i]);
        continue;
      }
      const int64_t n = tile[i] * grid[i];
      std::vector<int64_t> e;
      switch (rng() % 3) {
        case 0: e = {n}; break;
        case 1: e = {tile[i], grid[i]}; break;
        default: e = {grid[i], tile[i]}; break;
      }
      std::vector<int64_t> s;
      const std::vector<int64_t> pool = {0, 1, 2, 3, g.tile_size(), g.slots() / std::max<int64_t>(1, grid[i]),
                                         tile[0], static_cast<int64_t>(rng() % (g.slots() + 1))};
      for (size_t j = 0; j < e.size(); ++j) s.push_back(pool[rng() % pool.size()]);
      shape.push_back(swtest::node(e));
      stride.push_back(swtest::node(s));
    }
    const Layout l(N(shape), N(stride));
    const int64_t offset = rng() % 8 == 0 ? 1 : 0;
    Association a;
    const bool got = !g.check(l, offset, &a);
    ASSERT_EQ(got, brute_compatible(g, l, offset)) << sw::to_string(l.shape()) << ":" << sw::to_string(l.stride())
                                                   << " " << sw::tiled::to_string(kind);
    if (!got) continue;
    ++compatible;
    // the association reaches each tile's slots as the layout does
    std::vector<int64_t> full;
    for (size_t i = 0; i < rank; ++i) full.push_back(tile[i] * grid[i]);
    for (const auto& x : coordinates(full)) {
      std::vector<int64_t> t, y;
      int64_t off = 0;
      for (size_t i = 0; i < rank; ++i) {
        t.push_back(x[i] / tile[i]);
        off += index_of(a.within[i], x[i] % tile[i]);
      }
      ASSERT_EQ(g.base(g.ordinal(t)) + off, index_at(l, x));
    }
    // and as packed positions
    const ModeLeaves pk = g.packed(a.within);
    for (const auto& y : coordinates(tile)) {
      int64_t off = 0, pos = 0;
      for (size_t i = 0; i < rank; ++i) {
        off += index_of(a.within[i], y[i]);
        pos += index_of(pk[i], y[i]);
      }
      ASSERT_EQ(g.pack(off), pos);
    }
  }
  EXPECT_GT(compatible, 300);
}

TEST(TiledGeometry, LargeModesAreDecidedWithoutEnumeration) {
  const int64_t n = int64_t(8) << 20;
  const Geometry one(GeometryKind::Tiles, {8}, {n / 8});
  Association a;
  EXPECT_FALSE(one.check(flat({n}, {1}), 0, &a));
  EXPECT_TRUE(a.canonical);
  EXPECT_EQ(one.check(flat({n}, {2}), 0, nullptr).rule, Rule::Remapped);
  // an 8M-element tile transposed inside
  const int64_t r = 2048, c = 4096;
  const Geometry big(GeometryKind::Tiles, {2, 1}, {r, c});
  const Layout t(N({swtest::node({r, 2}), swtest::node({c})}), N({swtest::node({c, r * c}), swtest::node({1})}));
  EXPECT_FALSE(big.check(t, 0, &a));
  EXPECT_FALSE(a.canonical);
}

TEST(TiledGeometry, RegridKeepsTheKind) {
  const Geometry rm(GeometryKind::RowMajor, {64, 1, 1}, {1, 4, 4});
  const Geometry c = rm.regrid({3, 1, 1});
  EXPECT_EQ(c.kind(), GeometryKind::RowMajor);
  EXPECT_EQ(sw::to_string(c.layout().shape()), "(3, 4, 4)");
  const Layout ex = swtest::layout({4, 6}, {6, 1});
  EXPECT_EQ(Geometry(GeometryKind::Explicit, {2, 2}, {2, 3}, &ex).regrid({1, 2}).kind(), GeometryKind::Dense);
}

// GoogleTest for request planning (tiled/requests.hpp): each request's
// validation and commit changes, and its steps run by a small interpreter
// over vectors standing in for the carriers, for every geometry kind.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <vector>

#include "tiled/requests.hpp"
#include "builders.hpp"

using sw::Layout;
using sw::tiled::Association;
using sw::tiled::Buffer;
using sw::tiled::CompactView;
using sw::tiled::Geometry;
using sw::tiled::GeometryKind;
using sw::tiled::Location;
using sw::tiled::Place;
using sw::tiled::Plan;
using sw::tiled::Planner;
using sw::tiled::Refusal;
using sw::tiled::Request;
using sw::tiled::Residency;
using sw::tiled::Step;

namespace {

// The carriers of one request, as vectors; buffers by tile.
struct World {
  std::vector<float> secondary, slab, target, compact, out, zeros;
  std::map<int64_t, std::vector<float>> buffers, fresh;

  std::vector<float>& at(Place p, int64_t tile) {
    switch (p) {
      case Place::Secondary: return secondary;
      case Place::Slab: return slab;
      case Place::Buffer: return buffers.at(tile);
      case Place::Fresh: return fresh[tile];
      case Place::Zeros: return zeros;
      case Place::Target: return target;
      case Place::Compact: return compact;
      case Place::Out: return out;
    }
    return zeros;
  }

  void run(const Step& s) {
    std::vector<float>& d = at(s.dst, s.tile);
    if (s.zero) {
      std::fill(d.begin() + s.dst_off, d.begin() + s.dst_off + s.count, 0.0f);
      return;
    }
    std::vector<float>& src = at(s.src, s.tile);
    if (!s.logical) {
      for (int64_t i = 0; i < s.count; ++i) d.at(static_cast<size_t>(s.dst_off + i)) = src.at(static_cast<size_t>(s.src_off + i));
      return;
    }
    sw::for_each_index_pair(s.src_leaves, s.dst_leaves, [&](int64_t, int64_t si, int64_t di) {
      float v = src.at(static_cast<size_t>(s.src_off + si));
      float& o = d.at(static_cast<size_t>(s.dst_off + di));
      o = s.add ? o + v : v;
      return true;
    });
  }

  void run(const Plan& p) {
    for (const auto& u : p.units)
      for (const Step& s : u) run(s);
  }
};

Buffer handle(int64_t k) { return reinterpret_cast<Buffer>(static_cast<uintptr_t>(0x100 + 16 * k)); }

// The value of full logical coordinate x is its index in the geometry's own
// layout (every geometry holds the same logical values): swtest::index_at.
using swtest::coordinates;
using swtest::index_at;

// Logical value of full coordinate x: its row-major ordinal + 1 (never 0).
float logical_value(const std::vector<int64_t>& full, const std::vector<int64_t>& x) {
  int64_t o = 0;
  for (size_t i = 0; i < x.size(); ++i) o = o * full[i] + x[i];
  return static_cast<float>(o + 1);
}

std::vector<int64_t> full_of(const Geometry& g) {
  std::vector<int64_t> f;
  for (size_t i = 0; i < g.rank(); ++i) f.push_back(g.tile()[i] * g.grid()[i]);
  return f;
}

// A full carrier of g holding the logical values.
std::vector<float> filled(const Geometry& g) {
  std::vector<float> v(static_cast<size_t>(g.slots()));
  const auto full = full_of(g);
  for (const auto& x : coordinates(full)) v[static_cast<size_t>(index_at(g.layout(), x))] = logical_value(full, x);
  return v;
}

// Tile k's values packed (footprint slot order).
std::vector<float> packed(const Geometry& g, const std::vector<float>& full, int64_t k) {
  std::vector<float> v(static_cast<size_t>(g.tile_size()));
  for (int64_t p = 0; p < g.tile_size(); ++p) v[static_cast<size_t>(p)] = full[static_cast<size_t>(g.base(k) + g.unpack(p))];
  return v;
}

Association own(const Geometry& g) {
  Association a;
  EXPECT_FALSE(g.check(g.layout(), 0, &a));
  return a;
}

class Requests : public ::testing::TestWithParam<GeometryKind> {};

}  // namespace

TEST_P(Requests, PromoteCopiesSecondaryTilesIntoFreshPackedBuffersAndZerosImplicitOnes) {
  const Geometry g(GetParam(), {3, 2}, {2, 3});
  Residency r;
  r.reset(g.tiles(), Location::Secondary, false);
  r.set(4, Location::Implicit, false, nullptr, nullptr);
  World w;
  w.secondary = filled(g);
  Plan p;
  ASSERT_FALSE(Planner(g, r).residency({1, 4, 5}, true, &p));
  EXPECT_EQ(p.fresh, (std::vector<int64_t>{1, 4, 5}));
  EXPECT_EQ(p.reg.kind, Request::Kind::Residency);
  for (int64_t k : p.fresh) w.fresh[k].assign(static_cast<size_t>(g.tile_size()), -1.0f);
  w.run(p);
  EXPECT_EQ(w.fresh[1], packed(g, w.secondary, 1));
  EXPECT_EQ(w.fresh[5], packed(g, w.secondary, 5));
  EXPECT_EQ(w.fresh[4], std::vector<float>(static_cast<size_t>(g.tile_size()), 0.0f));
  ASSERT_EQ(p.reg.changes.size(), 3u);
  EXPECT_TRUE(p.reg.changes[1].dirty);   // a promoted implicit tile is dirty
  EXPECT_FALSE(p.reg.changes[0].dirty);
  // commit: the buffers become the tiles'
  for (auto& c : p.reg.changes) c.buffer = handle(c.tile);
  r.register_request(p.reg);
  r.commit(p.reg, nullptr);
  r.unregister(p.reg);
  EXPECT_EQ(r.buffer(5), handle(5));
  EXPECT_EQ(r.count(Location::Primary), 3);
}

TEST_P(Requests, EvictWritesDirtyTilesBackFromSlabAndBuffers) {
  const Geometry g(GetParam(), {2, 2}, {3, 2});
  Residency r;
  r.reset(g.tiles(), Location::Primary, true);  // all in the slab
  World w;
  w.slab = filled(g);
  w.secondary.assign(static_cast<size_t>(g.slots()), 0.0f);
  // tile 2 in a buffer with other values; tile 3 clean
  r.set(2, Location::Primary, true, handle(2), nullptr);
  w.buffers[2] = std::vector<float>(static_cast<size_t>(g.tile_size()), 9.0f);
  r.set(3, Location::Primary, false, nullptr, nullptr);
  Plan p;
  ASSERT_FALSE(Planner(g, r).residency({0, 2, 3}, false, &p));
  EXPECT_TRUE(p.grows_secondary);
  EXPECT_EQ(p.units.size(), 2u);  // the clean tile copies nothing
  w.run(p);
  EXPECT_EQ(packed(g, w.secondary, 0), packed(g, w.slab, 0));
  EXPECT_EQ(packed(g, w.secondary, 2), w.buffers[2]);
  EXPECT_EQ(packed(g, w.secondary, 3), std::vector<float>(static_cast<size_t>(g.tile_size()), 0.0f));
  std::vector<Buffer> freed;
  r.register_request(p.reg);
  r.commit(p.reg, &freed);
  r.unregister(p.reg);
  EXPECT_EQ(freed, std::vector<Buffer>{handle(2)});
  EXPECT_EQ(r.count(Location::Secondary), 3);
}

TEST_P(Requests, ProjectGathersEveryLocationIntoTheCompactLayout) {
  const Geometry g(GetParam(), {3, 2}, {2, 2});
  Residency r;
  r.reset(g.tiles(), Location::Secondary, false);
  World w;
  w.secondary = filled(g);
  w.slab = filled(g);
  r.set(1, Location::Primary, false, nullptr, nullptr);  // slab
  r.set(3, Location::Primary, false, handle(3), nullptr);
  w.buffers[3] = packed(g, w.secondary, 3);
  r.set(5, Location::Implicit, false, nullptr, nullptr);
  const std::vector<int64_t> tiles = {5, 3, 1, 0};  // a selection ([1, 0, 2, 1] ...) in compact order
  const std::vector<int64_t> cgrid = {4, 1};
  const Geometry cg = g.regrid(cgrid);
  const auto tv = sw::tiled::compact_view(cg.layout(), 0, g.tile(), cgrid);
  ASSERT_TRUE(tv);
  Plan p;
  ASSERT_FALSE(Planner(g, r).project(tiles, own(g), *tv, false, &p));
  EXPECT_EQ(p.reg.reads, tiles);
  w.target.assign(static_cast<size_t>(cg.slots()), -1.0f);
  w.run(p);
  // compact coordinate (j * tile0 + y0, y1) holds full tile tiles[j]'s (y0, y1)
  const auto full = full_of(g);
  for (size_t j = 0; j < tiles.size(); ++j) {
    const auto t = g.coordinate(tiles[j]);
    for (const auto& y : coordinates(g.tile())) {
      const std::vector<int64_t> x = {t[0] * 2 + y[0], t[1] * 2 + y[1]};
      const std::vector<int64_t> c = {static_cast<int64_t>(j) * 2 + y[0], y[1]};
      const float want = tiles[j] == 5 ? 0.0f : logical_value(full, x);
      EXPECT_EQ(w.target[static_cast<size_t>(index_at(cg.layout(), c))], want) << j;
    }
  }
}

TEST_P(Requests, ScatterReplaceAndAddIntoAFreshResult) {
  const Geometry g(GetParam(), {2, 2}, {2, 3});
  Residency r;
  r.reset(g.tiles(), Location::Secondary, false);
  World w;
  w.secondary = filled(g);
  const std::vector<int64_t> cgrid = {1, 2};
  const Geometry cg = g.regrid(cgrid);
  const auto cv = sw::tiled::compact_view(cg.layout(), 0, g.tile(), cgrid);
  w.compact.resize(static_cast<size_t>(cg.slots()));
  std::iota(w.compact.begin(), w.compact.end(), 100.0f);
  for (bool add : {false, true}) {
    w.out.assign(static_cast<size_t>(g.slots()), 0.0f);
    Plan p;
    ASSERT_FALSE(Planner(g, r).scatter({1, 3}, own(g), *cv, add, &p));
    EXPECT_EQ(p.reg.reads.size(), add ? 2u : 0u);
    w.run(p);
    // projecting Out's tiles back gives compact (+ the template values for add)
    for (size_t j = 0; j < 2; ++j) {
      const int64_t k = j == 0 ? 1 : 3;
      for (const auto& y : coordinates(g.tile())) {
        const auto t = g.coordinate(k);
        const std::vector<int64_t> x = {t[0] * 2 + y[0], t[1] * 3 + y[1]};
        const std::vector<int64_t> c = {y[0], static_cast<int64_t>(j) * 3 + y[1]};
        const float base = add ? w.secondary[static_cast<size_t>(index_at(g.layout(), x))] : 0.0f;
        EXPECT_EQ(w.out[static_cast<size_t>(index_at(g.layout(), x))],
                  base + w.compact[static_cast<size_t>(index_at(cg.layout(), c))]);
      }
    }
  }
}

TEST_P(Requests, AssignWritesFreshPackedBuffers) {
  const Geometry g(GetParam(), {2, 2}, {2, 2});
  Residency r;
  r.reset(g.tiles(), Location::Secondary, false);
  World w;
  const std::vector<int64_t> cgrid = {2, 1};
  const Geometry cg = g.regrid(cgrid);
  const auto cv = sw::tiled::compact_view(cg.layout(), 0, g.tile(), cgrid);
  w.compact.resize(static_cast<size_t>(cg.slots()));
  std::iota(w.compact.begin(), w.compact.end(), 1.0f);
  Plan p;
  ASSERT_FALSE(Planner(g, r).assign({2, 0}, own(g), *cv, &p));
  EXPECT_EQ(p.fresh, (std::vector<int64_t>{2, 0}));
  for (int64_t k : p.fresh) w.fresh[k].assign(static_cast<size_t>(g.tile_size()), 0.0f);
  w.run(p);
  // unpacked into a full carrier, the tile holds the compact values
  std::vector<float> full(static_cast<size_t>(g.slots()), 0.0f);
  for (int64_t k : p.fresh)
    for (int64_t q = 0; q < g.tile_size(); ++q) full[static_cast<size_t>(g.base(k) + g.unpack(q))] = w.fresh[k][static_cast<size_t>(q)];
  for (size_t j = 0; j < 2; ++j) {
    const int64_t k = j == 0 ? 2 : 0;
    const auto t = g.coordinate(k);
    for (const auto& y : coordinates(g.tile())) {
      const std::vector<int64_t> x = {t[0] * 2 + y[0], t[1] * 2 + y[1]};
      const std::vector<int64_t> c = {static_cast<int64_t>(j) * 2 + y[0], y[1]};
      EXPECT_EQ(full[static_cast<size_t>(index_at(g.layout(), x))], w.compact[static_cast<size_t>(index_at(cg.layout(), c))]);
    }
  }
  for (const auto& c : p.reg.changes) EXPECT_TRUE(c.dirty && c.fresh && c.location == Location::Primary);
}

INSTANTIATE_TEST_SUITE_P(EveryGeometry, Requests,
                         ::testing::Values(GeometryKind::Tiles, GeometryKind::Dense, GeometryKind::RowMajor));

TEST(TiledRequests, RefusalsComeBeforeAnyPlan) {
  const Geometry g(GeometryKind::Tiles, {4}, {2});
  Residency r;
  r.reset(4, Location::Primary, true);
  Request evict;
  evict.kind = Request::Kind::Residency;
  evict.writes = {1};
  r.register_request(evict);
  Plan p;
  const Planner pl(g, r);
  EXPECT_EQ(pl.residency({0, 1}, true, &p).rule, Refusal::Rule::Busy);
  const auto tv = sw::tiled::compact_view(g.regrid({1}).layout(), 0, g.tile(), {1});
  EXPECT_EQ(pl.project({1}, own(g), *tv, true, &p).rule, Refusal::Rule::InResidencyRequest);
  EXPECT_EQ(pl.read_all(&p).rule, Refusal::Rule::InResidencyRequest);
  r.unregister(evict);
  r.set(2, Location::Invalid, false, nullptr, nullptr);
  EXPECT_EQ(pl.project({2}, own(g), *tv, true, &p).tile, 2);
  EXPECT_EQ(pl.residency({2}, true, &p).rule, Refusal::Rule::Invalid);
  EXPECT_EQ(pl.read_all(&p).rule, Refusal::Rule::Invalid);
}

TEST(TiledRequests, APolicyPromotesOnlyIdleTilesAndRetains) {
  const Geometry g(GeometryKind::Tiles, {4}, {2});
  Residency r;
  r.reset(4, Location::Secondary, false);
  Request other;
  other.writes = {3};
  r.register_request(other);
  Plan p;
  p.reg.reads = {0};
  Planner(g, r).policy({0, 1, 3}, {2}, &p);
  EXPECT_EQ(p.reg.writes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p.reg.retains, std::vector<int64_t>{2});
  EXPECT_EQ(p.units.size(), 2u);
  r.unregister(other);
}

TEST(TiledRequests, FlushLeavesDirtyTilesPrimaryAndClean) {
  const Geometry g(GeometryKind::Tiles, {3}, {2});
  Residency r;
  r.reset(3, Location::Primary, true);
  r.set(1, Location::Primary, false, handle(1), nullptr);
  Plan p;
  ASSERT_FALSE(Planner(g, r).flush({}, true, &p));
  EXPECT_EQ(p.reg.writes, (std::vector<int64_t>{0, 2}));
  for (const auto& c : p.reg.changes) EXPECT_TRUE(c.location == Location::Primary && !c.dirty);
}

TEST(TiledRequests, CompactViewsNeedTileDivisibleModes) {
  EXPECT_TRUE(sw::tiled::compact_view(swtest::layout({4, 6}, {6, 1}), 0, {2, 3}, {2, 2}));
  EXPECT_FALSE(sw::tiled::compact_view(swtest::layout({4, 6}, {6, 1}), 0, {2, 3}, {2, 3}));
  const Layout odd(swtest::N({swtest::node({3, 2})}), swtest::N({swtest::node({2, 1})}));
  EXPECT_FALSE(sw::tiled::compact_view(odd, 0, {2}, {3}));
  auto v = sw::tiled::compact_view(swtest::layout({4}, {1}), 5, {2}, {2});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->bases, (std::vector<int64_t>{5, 7}));
}

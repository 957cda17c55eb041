// Planning of TiledEvictable requests (requests.hpp).
#include "tiled/requests.hpp"

#include <algorithm>
#include <unordered_set>

#include "layout/algebra.hpp"

namespace sw::tiled {

namespace {

using Rule = Refusal::Rule;

}  // namespace

std::optional<CompactView> compact_view(const Layout& l, int64_t offset, const std::vector<int64_t>& tile,
                                        const std::vector<int64_t>& cgrid) {
  const IntTree& sh = l.shape();
  if (sh.is_leaf || sh.children.size() != tile.size() || cgrid.size() != tile.size()) return std::nullopt;
  CompactView v;
  ModeLeaves across;
  for (size_t i = 0; i < tile.size(); ++i) {
    const Leaves m = Layout(IntTree::node({sh.children[i]}), IntTree::node({l.stride().children[i]})).leaves();
    if (size_of(m) != tile[i] * cgrid[i]) return std::nullopt;
    auto parts = divide_leaves(m, tile[i]);
    if (!parts) return std::nullopt;
    v.within.push_back(std::move(parts->first));
    across.push_back(std::move(parts->second));
  }
  int64_t n = 1;
  for (int64_t e : cgrid) n *= e;
  v.bases.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t r = j, b = offset;
    for (size_t i = 0; i < cgrid.size(); ++i) {
      b += index_of(across[i], r % cgrid[i]);
      r /= cgrid[i];
    }
    v.bases[static_cast<size_t>(j)] = b;
  }
  return v;
}

Source source_of(const Geometry& g, const Residency& r, int64_t k) {
  switch (r.location(k)) {
    case Location::Primary:
      if (r.buffer(k)) return {Place::Buffer, 0, true};
      return {Place::Slab, g.base(k), false};
    case Location::Secondary:
      return {Place::Secondary, g.base(k), false};
    default:
      return {Place::Zeros, 0, true};
  }
}

void Planner::move_tile(int64_t k, Source from, Place to, int64_t to_base, bool to_packed, Unit* u) const {
  for (const Run& run : tile_runs(g_, {from.base, from.packed}, {to_base, to_packed})) {
    Step s;
    s.src = from.place;
    s.dst = to;
    s.tile = k;
    s.src_off = run.src;
    s.dst_off = run.dst;
    s.count = run.count;
    u->push_back(std::move(s));
  }
}

void Planner::promote_tile(int64_t k, Plan* out) const {
  const bool implicit = r_.location(k) == Location::Implicit;
  out->reg.writes.push_back(k);
  out->fresh.push_back(k);
  out->reg.changes.push_back({k, Location::Primary, implicit, nullptr, true});
  Unit u;
  if (!implicit) {
    move_tile(k, source_of(g_, r_, k), Place::Fresh, 0, true, &u);
  } else {
    Step z;
    z.dst = Place::Fresh;
    z.tile = k;
    z.count = g_.tile_size();
    z.zero = true;
    u.push_back(z);
  }
  out->units.push_back(std::move(u));
}

void Planner::copy_tile(int64_t k, Place src, const ModeLeaves& sa, int64_t sb, Place dst, const ModeLeaves& da,
                        int64_t db, bool add, Unit* u) const {
  Step s;
  s.src = src;
  s.dst = dst;
  s.tile = k;
  auto c = TileCopy::plan(sa, sb, da, db);
  if (!c) {
    // No common refinement: coordinate by coordinate (never met by the
    // associations this library builds, kept for completeness).
    std::vector<int64_t> y(g_.rank(), 0);
    for (int64_t o = 0; o < g_.tile_size(); ++o) {
      int64_t r = o, so = sb, d = db;
      for (size_t i = 0; i < g_.rank(); ++i) {
        so += index_of(sa[i], r % g_.tile()[i]);
        d += index_of(da[i], r % g_.tile()[i]);
        r /= g_.tile()[i];
      }
      Step e = s;
      e.logical = true;
      e.src_leaves = {{1, 0}};
      e.dst_leaves = {{1, 0}};
      e.src_off = so;
      e.dst_off = d;
      e.add = add;
      u->push_back(std::move(e));
    }
    return;
  }
  if (!add && (c->run() == c->size() || c->run() >= kMinRunSlots)) {
    c->for_each_run([&](int64_t so, int64_t d, int64_t n) {
      Step e = s;
      e.src_off = so;
      e.dst_off = d;
      e.count = n;
      u->push_back(std::move(e));
    });
    return;
  }
  s.logical = true;
  s.src_leaves = c->src();
  s.dst_leaves = c->dst();
  s.src_off = c->src_base();
  s.dst_off = c->dst_base();
  s.add = add;
  u->push_back(std::move(s));
}

Refusal Planner::residency(const std::vector<int64_t>& tiles, bool promote, Plan* out) const {
  for (int64_t k : tiles)
    if (r_.busy(k)) return {Rule::Busy, k};
  if (promote)
    for (int64_t k : tiles)
      if (!r_.valid(k)) return {Rule::Invalid, k};
  out->reg.kind = Request::Kind::Residency;
  for (int64_t k : tiles) {
    const Location loc = r_.location(k);
    if (promote) {
      if (loc == Location::Secondary || loc == Location::Implicit) promote_tile(k, out);
    } else {
      if (loc != Location::Primary) continue;
      out->reg.writes.push_back(k);
      out->reg.changes.push_back({k, Location::Secondary, false, nullptr, false});
      if (r_.dirty(k)) {
        Unit u;
        move_tile(k, source_of(g_, r_, k), Place::Secondary, g_.base(k), false, &u);
        out->units.push_back(std::move(u));
        out->grows_secondary = true;
      }
    }
  }
  return {};
}

Refusal Planner::flush(const std::vector<int64_t>& tiles, bool all_tiles, Plan* out) const {
  std::vector<int64_t> all;
  if (all_tiles && r_.dirty_count())
    all = r_.where([](Location l, bool dirty) { return l == Location::Primary && dirty; });
  const std::vector<int64_t>& ts = all_tiles ? all : tiles;
  for (int64_t k : ts)
    if (r_.busy(k)) return {Rule::Busy, k};
  out->reg.kind = Request::Kind::Residency;
  for (int64_t k : ts) {
    if (r_.location(k) != Location::Primary || !r_.dirty(k)) continue;
    out->reg.writes.push_back(k);
    out->reg.changes.push_back({k, Location::Primary, false, r_.buffer(k), false});
    Unit u;
    move_tile(k, source_of(g_, r_, k), Place::Secondary, g_.base(k), false, &u);
    out->units.push_back(std::move(u));
    out->grows_secondary = true;
  }
  return {};
}

Refusal Planner::project(const std::vector<int64_t>& tiles, const Association& w, const CompactView& tv,
                         bool target_zero, Plan* out) const {
  if (r_.any_in_residency_request())
    for (int64_t k : tiles)
      if (r_.in_residency_request(k)) return {Rule::InResidencyRequest, k};
  if (r_.first_invalid(tiles) >= 0) return {Rule::Invalid, r_.first_invalid(tiles)};
  out->reg.kind = Request::Kind::Data;
  out->reg.reads = tiles;
  ModeLeaves packed_w;
  for (size_t j = 0; j < tiles.size(); ++j) {
    const int64_t k = tiles[j];
    const Source s = source_of(g_, r_, k);
    Unit u;
    if (s.place == Place::Zeros) {
      if (target_zero) continue;
      auto c = TileCopy::plan(tv.within, tv.bases[j], tv.within, tv.bases[j]);
      if (!c) continue;  // (a view of the target's own layout always refines)
      c->for_each_run([&](int64_t, int64_t d, int64_t n) {
        Step z;
        z.dst = Place::Target;
        z.tile = k;
        z.dst_off = d;
        z.count = n;
        z.zero = true;
        u.push_back(z);
      });
    } else {
      if (s.packed && packed_w.empty()) packed_w = g_.packed(w.within);
      copy_tile(k, s.place, s.packed ? packed_w : w.within, s.base, Place::Target, tv.within, tv.bases[j], false, &u);
    }
    out->units.push_back(std::move(u));
  }
  return {};
}

Refusal Planner::scatter(const std::vector<int64_t>& tiles, const Association& w, const CompactView& cv, bool add,
                         Plan* out) const {
  if (r_.any_in_residency_request())
    for (int64_t k : tiles)
      if (r_.in_residency_request(k)) return {Rule::InResidencyRequest, k};
  if (add && r_.first_invalid(tiles) >= 0) return {Rule::Invalid, r_.first_invalid(tiles)};
  out->reg.kind = Request::Kind::Data;
  if (add) out->reg.reads = tiles;
  for (size_t j = 0; j < tiles.size(); ++j) {
    const int64_t k = tiles[j];
    Unit u;
    if (add) {
      const Source s = source_of(g_, r_, k);
      if (s.place != Place::Zeros) move_tile(k, s, Place::Out, g_.base(k), false, &u);
    }
    copy_tile(k, Place::Compact, cv.within, cv.bases[j], Place::Out, w.within, g_.base(k), add, &u);
    out->units.push_back(std::move(u));
  }
  return {};
}

Refusal Planner::assign(const std::vector<int64_t>& tiles, const Association& w, const CompactView& cv,
                        Plan* out) const {
  for (int64_t k : tiles)
    if (r_.busy(k)) return {Rule::Busy, k};
  out->reg.kind = Request::Kind::Residency;
  out->reg.writes = tiles;
  const ModeLeaves packed_w = g_.packed(w.within);
  for (size_t j = 0; j < tiles.size(); ++j) {
    const int64_t k = tiles[j];
    out->fresh.push_back(k);
    out->reg.changes.push_back({k, Location::Primary, true, nullptr, true});
    Unit u;
    copy_tile(k, Place::Compact, cv.within, cv.bases[j], Place::Fresh, packed_w, 0, false, &u);
    out->units.push_back(std::move(u));
  }
  return {};
}

void Planner::policy(const std::vector<int64_t>& promote, const std::vector<int64_t>& retain, Plan* out) const {
  std::unordered_set<int64_t> planned(out->reg.writes.begin(), out->reg.writes.end());
  for (int64_t k : promote) {
    const Location loc = r_.location(k);
    if (loc != Location::Secondary && loc != Location::Implicit) continue;
    // A tile another pending request changes is its business; one this
    // request already changes is planned.
    if (r_.writer(k) || !planned.insert(k).second) continue;
    promote_tile(k, out);
  }
  out->reg.retains.insert(out->reg.retains.end(), retain.begin(), retain.end());
}

Refusal Planner::read_all(Plan* out) const {
  const int64_t busy = r_.data_conflict_all();
  if (busy >= 0) return {Rule::InResidencyRequest, busy};
  const int64_t bad = r_.first_invalid_all();
  if (bad >= 0) return {Rule::Invalid, bad};
  out->reg.kind = Request::Kind::Data;
  out->reg.reads_all = true;
  return {};
}

}  // namespace sw::tiled

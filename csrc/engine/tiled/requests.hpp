// Planning of TiledEvictable requests: validation against the residency
// state, the copies each request needs (between abstract places the binding
// maps to carriers), and the changes its terminal commit applies.
//
//   promote / evict / flush   residency requests (conflict with any pending
//                             work on their tiles)
//   project                   gather selected tiles into a compact target
//   scatter                   write a compact tensor into a fresh carrier
//                             (reading the template's tiles for "add")
//   assign                    write a compact tensor into selected tiles in
//                             place (fresh buffers swapped in at commit)
//   policy                    a residency plan's promotions and retains,
//                             folded into a data request
//
// A copy reads a whole tile from where its value is: the slab (the full
// primary carrier) or the secondary at the tile's base, a private packed
// buffer, or nothing for an implicit tile (zeros). Copies between tiers move
// the footprint's runs; copies into or out of a compact tensor follow the
// full tensor's within-tile association, cut into runs where both sides are
// contiguous for long enough, else one logical copy.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "tiled/copies.hpp"
#include "tiled/geometry.hpp"
#include "tiled/residency.hpp"

namespace sw::tiled {

enum class Place : uint8_t {
  Secondary,  // the secondary tier (full)
  Slab,       // the full primary carrier
  Buffer,     // tile's current private buffer (packed)
  Fresh,      // tile's new private buffer, staged by the request (packed)
  Zeros,      // a packed tile of zeros
  Target,     // a projection's compact destination
  Compact,    // the compact input of scatter / assign
  Out,        // a scatter's fresh result (its slab)
};

struct Step {
  Place src = Place::Secondary, dst = Place::Secondary;
  int64_t tile = -1;  // the tile the step moves (profiled per tile)
  int64_t src_off = 0, dst_off = 0;
  int64_t count = 0;            // a run of slots, unless logical
  bool logical = false;         // src_leaves at src_off -> dst_leaves at dst_off
  Leaves src_leaves, dst_leaves;
  bool add = false;             // dst += src (logical)
  bool zero = false;            // dst = 0 over the run
};

// The steps of one tile, run in order on one thread.
using Unit = std::vector<Step>;

struct Plan {
  Request reg;
  std::vector<int64_t> fresh;  // tiles that need a new packed buffer (Place::Fresh)
  std::vector<Unit> units;
  bool grows_secondary = false;  // an empty secondary must get its slots first
  bool uses_zeros = false;       // some step reads Place::Zeros
};

// Why a request cannot start (the binding formats it).
struct Refusal {
  enum class Rule : uint8_t { None, Busy, InResidencyRequest, Invalid };
  Rule rule = Rule::None;
  int64_t tile = -1;
  explicit operator bool() const { return rule != Rule::None; }
};

// Runs shorter than this are copied as one logical copy (a strided host copy
// or values), longer ones run by run.
constexpr int64_t kMinRunSlots = 64;

// A compatible compact tensor's place: its association per mode and each
// compact tile's base (offset included).
struct CompactView {
  ModeLeaves within;
  std::vector<int64_t> bases;  // per compact tile ordinal
};
// The view of a compact tensor of layout l at offset over the compact grid
// (each mode of tile[i] * cgrid[i] coordinates dividing by tile[i]); nullopt
// when it does not divide so.
std::optional<CompactView> compact_view(const Layout& l, int64_t offset, const std::vector<int64_t>& tile,
                                        const std::vector<int64_t>& cgrid);

// The places a tile's value is read from right now.
struct Source {
  Place place;    // Secondary, Slab, Buffer, or Zeros (implicit)
  int64_t base;   // slot of the tile's first footprint slot there (0 packed)
  bool packed;
};
Source source_of(const Geometry& g, const Residency& r, int64_t k);

class Planner {
 public:
  Planner(const Geometry& g, const Residency& r) : g_(g), r_(r) {}

  // tiles: ordinals, each once. Promotion: every tile becomes primary in a
  // fresh buffer (secondary ones copied, implicit ones zero); eviction:
  // every primary tile leaves (dirty ones written back first).
  Refusal residency(const std::vector<int64_t>& tiles, bool promote, Plan* out) const;
  // Dirty primary tiles of tiles (all when empty and all_tiles) are written
  // to the secondary and left clean where they are.
  Refusal flush(const std::vector<int64_t>& tiles, bool all_tiles, Plan* out) const;
  // The selected tiles (compact order) of a full tensor of association w
  // into the compact target (its view tv). target_zero: it is zero-filled
  // (implicit tiles need no step).
  Refusal project(const std::vector<int64_t>& tiles, const Association& w, const CompactView& tv, bool target_zero,
                  Plan* out) const;
  // The reads of scatter on the template (add only) and the steps into the
  // fresh result Out (zero-filled, the same geometry): compact tile j (view
  // cv) at tile tiles[j] under association w.
  Refusal scatter(const std::vector<int64_t>& tiles, const Association& w, const CompactView& cv, bool add,
                  Plan* out) const;
  // Compact tile j into tile tiles[j] (association w) of this carrier, in a
  // fresh buffer swapped in at commit: the tile becomes primary and dirty.
  Refusal assign(const std::vector<int64_t>& tiles, const Association& w, const CompactView& cv, Plan* out) const;
  // Folds a residency plan's promotions (idle secondary or implicit tiles
  // nobody else changes) and retains into the data request out.
  void policy(const std::vector<int64_t>& promote, const std::vector<int64_t>& retain, Plan* out) const;
  // Reading every tile (a direct operation): every tile valid and none in a
  // residency request.
  Refusal read_all(Plan* out) const;

  // The building blocks (also for gradients and dense copies):
  // a whole tile between places holding the same footprint (full at a base,
  // or packed), run by run;
  void move_tile(int64_t k, Source from, Place to, int64_t to_base, bool to_packed, Unit* u) const;
  // every coordinate of a tile: the src association at src_base to the dst
  // association at dst_base (added when add).
  void copy_tile(int64_t k, Place src, const ModeLeaves& sa, int64_t sb, Place dst, const ModeLeaves& da, int64_t db,
                 bool add, Unit* u) const;

 private:
  // Secondary or implicit tile k onto a fresh packed buffer (read or zeroed).
  void promote_tile(int64_t k, Plan* out) const;

  const Geometry& g_;
  const Residency& r_;
};

}  // namespace sw::tiled

// Copy planning for tiles: the runs that move a tile between tiers (the
// same footprint on both sides, full or packed), and the logical copy of one
// tile's coordinates between two associations (projection, scatter,
// gradients), cut into runs that are contiguous on both sides where they
// exist. A tile that is not one contiguous run is transferred as its runs
// (the binding issues them as one vectored batch), never through a staging
// copy of the tensor.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "layout/layout.hpp"
#include "tiled/geometry.hpp"

namespace sw::tiled {

// count slots from src to dst (slot offsets in their carriers).
struct Run {
  int64_t src;
  int64_t dst;
  int64_t count;
  bool operator==(const Run& o) const = default;
};

// Where a whole tile is: at base in a full tier (the geometry's footprint)
// or packed at base in a private buffer (base 0) or a zero tile.
struct TilePlace {
  int64_t base = 0;
  bool packed = false;
};

// The runs copying one tile from src to dst (both hold the same footprint),
// adjacent runs merged: one run for a contiguous geometry.
std::vector<Run> tile_runs(const Geometry& g, TilePlace src, TilePlace dst);

// Every logical coordinate of one tile from the src association (at
// src_base) to the same coordinate of the dst association (at dst_base).
// src and dst have one leaf list per mode over the same within-tile extents;
// the plan holds them refined to common leaves.
class TileCopy {
 public:
  // nullopt when the two associations have no common refinement (a leaf of
  // one crosses a leaf boundary of the other without dividing it): the
  // caller then copies coordinate by coordinate.
  static std::optional<TileCopy> plan(const ModeLeaves& src, int64_t src_base, const ModeLeaves& dst,
                                      int64_t dst_base);

  // The joint leaves (same extents), first fastest, and the bases.
  const Leaves& src() const { return src_; }
  const Leaves& dst() const { return dst_; }
  int64_t src_base() const { return src_base_; }
  int64_t dst_base() const { return dst_base_; }
  int64_t size() const { return size_; }
  // Slots of the leading run contiguous on both sides.
  int64_t run() const { return run_; }
  int64_t runs() const { return size_ / run_; }
  // The same function on both sides up to the bases (a plain span copy when
  // also one run).
  bool same_layout() const { return same_; }
  // f(src_offset, dst_offset, count) for every run, in order.
  template <class F>
  void for_each_run(F&& f) const {
    if (run_ == size_) {
      f(src_base_, dst_base_, run_);
      return;
    }
    walk(joint_modes<2>({&rest_src_, &rest_dst_}),
         [&](const Indices<2>& i) { f(src_base_ + i[0], dst_base_ + i[1], run_); });
  }
  std::vector<Run> runs_list() const;

 private:
  Leaves src_, dst_, rest_src_, rest_dst_;
  int64_t src_base_ = 0, dst_base_ = 0, size_ = 1, run_ = 1;
  bool same_ = false;
};

// The common refinement of two leaf lists over one ordinal (same total
// size): both cut at every boundary of either, so leaf j of each covers the
// same ordinals. nullopt when a leaf of one straddles a boundary of the
// other that does not divide it.
std::optional<std::pair<Leaves, Leaves>> refine(const Leaves& a, const Leaves& b);

}  // namespace sw::tiled

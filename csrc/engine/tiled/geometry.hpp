// The tile geometry of a TiledEvictable: which physical slots each tile
// owns, and whether a full tensor's Layout reaches exactly those slots
// (tile-footprint compatibility).
//
// A geometry is a compact injective Layout P of the full logical tensor
// (rank r, mode i of tile[i] * grid[i] coordinates) divided by the tile
// shape: zipped_divide(P, tile) = (W, G), so tile t owns the slots
// G(t) + W(y) for every within-tile coordinate y. W is the same for every
// tile, so a tile's footprint is one set of slots shifted by its base G(t).
// The kinds:
//   Tiles     each tile is one contiguous run of T = prod(tile) slots at
//             encode(t) * T, inside it first-mode-fastest (API.md 13);
//             P is the hierarchical layout ((tile_i, grid_i)).
//   Dense     the whole logical tensor first-mode-fastest (Layout.canonical).
//   RowMajor  the whole logical tensor in C order (NumPy, .npy, safetensors).
//   Explicit  any compact injective rank-r Layout the caller gives.
//
// A tile in a private primary buffer is stored packed: its footprint's slots
// in increasing slot order, so the buffer is prod(tile) slots and a transfer
// between the buffer and a full tier is the footprint's runs in order. For
// Tiles packing is the identity.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layout/layout.hpp"

namespace sw::tiled {

using Leaves = std::vector<LeafMode>;
// Leaves per top-level mode (mode i's leaves act on the within-tile ordinal
// y_i, first leaf fastest).
using ModeLeaves = std::vector<Leaves>;

enum class GeometryKind : uint8_t { Tiles, Dense, RowMajor, Explicit };
// "tiles", "dense", "row-major", "layout".
const char* to_string(GeometryKind k);

// Why a full tensor's Layout is not tile-footprint compatible, in the order
// the rules are checked: rank, offset, then per mode its size, a leaf
// boundary at the tile extent, repeats within its tile part, its tile
// coordinates' bases; then the union of every mode's tile part against the
// carrier's footprint.
struct Incompatible {
  enum class Rule : uint8_t { None, Rank, Offset, ModeSize, Crosses, Repeats, Remapped, Aliases };
  Rule rule = Rule::None;
  int64_t mode = 0;
  int64_t coordinate = 0;
  int64_t got = 0;
  int64_t want = 0;
  explicit operator bool() const { return rule != Rule::None; }
};

// How a compatible full tensor's within-tile coordinates reach the slots of
// their tile: per mode, leaves from y_i to the offset from the tile's base.
struct Association {
  ModeLeaves within;
  // The carrier's own association (the same function as Geometry::within()).
  bool canonical = false;
};

class Geometry {
 public:
  Geometry() = default;
  // grid and tile: one rank >= 1, extents >= 1, prod(grid) * prod(tile)
  // within int64. layout: the geometry of Explicit (ignored otherwise): rank
  // r, mode i of tile[i] * grid[i] coordinates, compact and injective, and
  // divisible by the tile (a leaf boundary at every tile extent). Throws
  // std::invalid_argument naming what is wrong.
  Geometry(GeometryKind kind, std::vector<int64_t> grid, std::vector<int64_t> tile, const Layout* layout = nullptr);

  GeometryKind kind() const { return kind_; }
  const std::vector<int64_t>& grid() const { return grid_; }
  const std::vector<int64_t>& tile() const { return tile_; }
  size_t rank() const { return grid_.size(); }
  int64_t tiles() const { return tiles_; }
  int64_t tile_size() const { return tile_size_; }
  int64_t slots() const { return tiles_ * tile_size_; }
  // P: the compatible Layout of the full logical tensor (canonical_layout()).
  const Layout& layout() const { return layout_; }
  // W and G per mode (coalesced; an empty part is (1):(0)).
  const ModeLeaves& within() const { return within_; }
  const ModeLeaves& across() const { return across_; }

  // First-mode-fastest tile ordinal of coordinate t (in range) and back.
  int64_t ordinal(const std::vector<int64_t>& t) const;
  std::vector<int64_t> coordinate(int64_t k) const;
  // The first slot of tile k's footprint: G(t(k)).
  int64_t base(int64_t k) const;

  // The footprint as runs of slots relative to base(k), in slot order: each
  // run is run_length() slots and run j starts at run_offset(j).
  int64_t run_length() const { return run_; }
  int64_t run_count() const { return tile_size_ / run_; }
  int64_t run_offset(int64_t j) const;
  // Every tile is one contiguous run of T slots.
  bool contiguous() const { return run_ == tile_size_; }

  // The tile holding slot s (0 <= s < slots()) and s's position in the
  // packed tile.
  std::pair<int64_t, int64_t> locate(int64_t slot) const;
  // Offset from the tile's base of packed position p, and back (o must be in
  // the footprint).
  int64_t unpack(int64_t p) const;
  int64_t pack(int64_t o) const;
  // w in packed positions (the association as it reads a packed tile).
  // Throws std::logic_error when w's leaves carry across the packing's
  // digits (no compatible association does).
  ModeLeaves packed(const ModeLeaves& w) const;

  // Whether the Layout l at offset is tile-footprint compatible: the
  // violated rule (None when compatible, *out then set).
  Incompatible check(const Layout& l, int64_t offset, Association* out) const;
  // "...: it is not tile-footprint compatible" for a violated rule.
  std::string message(const Incompatible& why) const;

  // This geometry over another grid, for a compact result of a selection:
  // Tiles, Dense and RowMajor keep their kind; Explicit becomes Dense.
  Geometry regrid(const std::vector<int64_t>& grid) const;

 private:
  GeometryKind kind_ = GeometryKind::Tiles;
  std::vector<int64_t> grid_, tile_;
  int64_t tiles_ = 0, tile_size_ = 0;
  Layout layout_;
  ModeLeaves within_, across_;
  // The footprint's normal form: W's leaves sorted by stride and coalesced
  // (nested: each stride at least the span of the ones before), with the
  // packed strides (compact in that order).
  Leaves footprint_;
  std::vector<int64_t> packed_stride_;
  int64_t run_ = 1;
  // Every leaf of the divided P sorted by stride (a mixed radix of the
  // slots): for locate().
  struct Digit {
    int64_t extent, stride;
    bool within;
    size_t mode;
    int64_t weight;  // of this leaf's digit in the mode's y_i or t_i
  };
  std::vector<Digit> digits_;
  std::vector<int64_t> grid_scale_;  // prod(grid[:i])
};

// W's leaves (every mode's, in mode order) sorted by stride and coalesced,
// extent-1 leaves dropped: two injective tile parts reach the same set of
// slots exactly when these agree.
Leaves normal_form(const ModeLeaves& w);

// The index the colexicographic ordinal x reaches over leaves (first leaf
// fastest).
int64_t index_of(const Leaves& leaves, int64_t x);

// Python-tuple text of extents: "(2, 3)", "(4,)".
std::string tuple_text(const std::vector<int64_t>& v);

}  // namespace sw::tiled

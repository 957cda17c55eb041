// Splitting layouts of one shape into the tiles of a tile grid, so a direct
// operation on a tiled tensor can run tile by tile (csrc/python/autograd/ops_tiled.cpp).
//
// Top-level mode i of the shape has tile_shape[i] * grid_shape[i]
// coordinates; its flat (colexicographic) ordinal x lies in tile coordinate
// x / tile_shape[i]. When every mode's leaves split at tile_shape[i] (a
// prefix of the leaves has that product, cutting at most one leaf in two),
// every operand's logical tile is one layout: the same within-tile leaves for
// every tile, at a per-tile offset. That is the split; otherwise there is none.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "layout/layout.hpp"

namespace sw {

struct TileSplit {
  // leaves[op]: operand op's within-tile leaves (extents equal across operands).
  std::vector<std::vector<LeafMode>> leaves;
  // offsets[k][op]: operand op's index of the first coordinate of tile k
  // (k the first-grid-mode-fastest ordinal), relative to the operand's offset.
  std::vector<std::vector<int64_t>> offsets;
};

// layouts: operands of one shape (rank == tile_shape.size()); nullopt when a
// mode's size is not tile * grid or its leaves do not split at the tile
// extent. Throws std::invalid_argument on mismatched shapes or ranks.
std::optional<TileSplit> split_tiles(const std::vector<const Layout*>& layouts, const std::vector<int64_t>& tile_shape,
                                     const std::vector<int64_t>& grid_shape);

// [lowest, highest] index reached by leaves from index 0.
std::pair<int64_t, int64_t> leaf_reach(const std::vector<LeafMode>& leaves);

}  // namespace sw

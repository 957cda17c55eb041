#include "tiled/tile_split.hpp"

#include <stdexcept>

namespace sw {

namespace {

// One mode's leaves of every operand: same extents, per-operand strides.
struct ModeLeaves {
  std::vector<int64_t> extent;
  std::vector<std::vector<int64_t>> stride;  // [op][leaf]
};

void collect(const IntTree& shape, const IntTree& stride, std::vector<int64_t>& e, std::vector<int64_t>& s) {
  if (shape.is_leaf) {
    e.push_back(shape.value);
    s.push_back(stride.value);
    return;
  }
  for (size_t i = 0; i < shape.children.size(); ++i) collect(shape.children[i], stride.children[i], e, s);
}

}  // namespace

std::pair<int64_t, int64_t> leaf_reach(const std::vector<LeafMode>& leaves) {
  int64_t lo = 0, hi = 0;
  for (const LeafMode& l : leaves) {
    if (l.extent <= 0) continue;
    const int64_t span = l.stride * (l.extent - 1);
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi};
}

std::optional<TileSplit> split_tiles(const std::vector<const Layout*>& layouts, const std::vector<int64_t>& tile_shape,
                                     const std::vector<int64_t>& grid_shape) {
  const size_t rank = tile_shape.size();
  if (layouts.empty() || grid_shape.size() != rank) throw std::invalid_argument("split_tiles: rank mismatch");
  const IntTree& shape = layouts[0]->shape();
  for (const Layout* l : layouts)
    if (!(l->shape() == shape)) throw std::invalid_argument("split_tiles: operands of different shapes");
  if (shape.is_leaf || shape.children.size() != rank) return std::nullopt;
  const size_t nops = layouts.size();
  TileSplit out;
  out.leaves.resize(nops);
  // grid[i]: the grid part of mode i (extents, strides per operand).
  std::vector<ModeLeaves> grid(rank);
  int64_t tiles = 1;
  for (size_t i = 0; i < rank; ++i) {
    ModeLeaves m;
    m.stride.resize(nops);
    for (size_t op = 0; op < nops; ++op) {
      std::vector<int64_t> e;
      collect(layouts[op]->shape().children[i], layouts[op]->stride().children[i], e, m.stride[op]);
      if (op == 0) m.extent = e;
    }
    const int64_t t = tile_shape[i], g = grid_shape[i];
    if (t <= 0 || g <= 0) return std::nullopt;
    int64_t size = 1;
    for (int64_t e : m.extent) size *= e;
    if (size != t * g) return std::nullopt;
    int64_t c = 1;
    size_t j = 0;
    ModeLeaves& gm = grid[i];
    gm.stride.resize(nops);
    for (; j < m.extent.size() && c < t; ++j) {
      const int64_t e = m.extent[j];
      if (c * e <= t) {
        if (t % (c * e) != 0) return std::nullopt;
        for (size_t op = 0; op < nops; ++op) out.leaves[op].push_back({e, m.stride[op][j]});
        c *= e;
        continue;
      }
      const int64_t a = t / c;  // c divides t (checked at every step)
      if (e % a != 0) return std::nullopt;
      for (size_t op = 0; op < nops; ++op) {
        out.leaves[op].push_back({a, m.stride[op][j]});
        gm.stride[op].push_back(m.stride[op][j] * a);
      }
      gm.extent.push_back(e / a);
      c = t;
      ++j;
      break;
    }
    if (c != t) return std::nullopt;
    for (; j < m.extent.size(); ++j) {
      gm.extent.push_back(m.extent[j]);
      for (size_t op = 0; op < nops; ++op) gm.stride[op].push_back(m.stride[op][j]);
    }
    tiles *= g;
  }
  // Per-mode offsets of each grid coordinate, then their sums per tile.
  std::vector<std::vector<std::vector<int64_t>>> mode_off(rank);  // [i][g][op]
  for (size_t i = 0; i < rank; ++i) {
    const ModeLeaves& gm = grid[i];
    mode_off[i].assign(grid_shape[i], std::vector<int64_t>(nops, 0));
    for (int64_t x = 0; x < grid_shape[i]; ++x) {
      int64_t rest = x;
      for (size_t j = 0; j < gm.extent.size(); ++j) {
        const int64_t y = rest % gm.extent[j];
        rest /= gm.extent[j];
        for (size_t op = 0; op < nops; ++op) mode_off[i][x][op] += y * gm.stride[op][j];
      }
    }
  }
  out.offsets.assign(tiles, std::vector<int64_t>(nops, 0));
  for (int64_t k = 0; k < tiles; ++k) {
    int64_t rest = k;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t x = rest % grid_shape[i];
      rest /= grid_shape[i];
      for (size_t op = 0; op < nops; ++op) out.offsets[k][op] += mode_off[i][x][op];
    }
  }
  return out;
}

}  // namespace sw

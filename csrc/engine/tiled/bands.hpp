// Direct operations on full TiledEvictable tensors computed tile by tile:
// the planning (every operand split at the tile grid, the tiles cut into
// bands) and the loop that reads a chunk of tiles at a time and runs the
// kernels on it, so the work holds about one tile of a tiled operand's
// values at once beyond its result ("tiles" geometry: tile k is the slots
// [k * T, (k + 1) * T) of its carrier).
//
// The compact result interleaves the tiles (the grid index is part of every
// mode), so a whole tile's result is spread over the whole result; tiles are
// computed in bands (along the slowest within-tile leaf, band b of every
// tile before band b + 1) so a band of every tile is one stretch of the
// result, written while it is in cache, and each band in parts whose result
// is about 256 KiB. A backward writes the gradient exactly as the dense
// kernel would (same kernel, same coordinate-by-coordinate arithmetic).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "dtype/dtype.hpp"
#include "layout/layout.hpp"
#include "ops/kernels.hpp"
#include "tiled/tile_split.hpp"

namespace sw::tiled {

// MulGradSum: mul's gradient of an operand broadcast to the tiled one's
// shape, summed over the broadcast coordinates.
enum class BandKind { Add, Mul, MulScalar, Relu, Sum, ReluGrad, MulGrad, MulGradSum };

struct BandOperand {
  Layout layout;               // the operand's own layout
  bool tiled = false;
  int reader = -1;             // tiled: which tiled carrier reads it
  int64_t offset = 0;          // its offset in its carrier
  const char* host = nullptr;  // dense: the address of slot 0 of its carrier
};

// Every tile is computed in `count` bands along leaf `leaf`, each band in
// `subs` parts.
struct Bands {
  int64_t count = 1;
  size_t leaf = 0;
  std::vector<kernels::Leaves> leaves;  // per operand, then the output: a band's leaves
  int64_t subs = 1;
  std::vector<kernels::Leaves> sub;     // a part's
};

struct BandWork {
  BandKind kind = BandKind::Add;
  DTypeCode dtype = DTypeCode::Float32;  // the operands' (the result is Float32 for gradients)
  std::vector<BandOperand> ops;          // 1 or 2
  Layout out;                            // the result's layout (not used by Sum)
  int64_t out_slots = 0;                 // the result's slots (MulGradSum accumulates over them)
  std::vector<int64_t> grid, tile;
  double scalar_f = 0;   // MulScalar, Float32
  int64_t scalar_i = 0;  // MulScalar, Int32
  // Planned by plan_bands:
  TileSplit split;
  int64_t T = 0;
  Bands bands;
  int readers = 0;
};

// Splits every operand (over shape, broadcast; a tiled one must have that
// very shape) and the output at the tile grid and plans the bands. False
// when the work cannot run tile by tile: a layout whose modes do not split
// at the tile extents, a tiled operand of another shape, or one whose tile k
// reaches outside carrier tile k.
bool plan_bands(BandWork& w, const IntTree& shape);

// MulGradSum adds the products landing on a slot in coordinate order
// (colexicographic; double sums are not associative). Tile by tile keeps
// that order when the summed coordinates lie all within the tiles or all
// across them, not when both.
bool tile_order_sums(const BandWork& w);

// Reads spans of one tiled carrier: spans[j] = (tile k, first slot, count)
// relative to tile k's first slot; at[j] receives the address of the span's
// first slot (valid until the next call). False when the read failed.
using BandRead = std::function<bool(int reader, const std::vector<std::array<int64_t, 3>>& spans,
                                    std::vector<const char*>* at)>;

// Runs the planned work into out (the result's storage: w.out's slots of
// the result dtype; Sum writes one value). False when a read failed (its
// error is the caller's); throws what the kernels throw (std::overflow_error
// for an Int32 result out of range).
bool run_bands(const BandWork& w, void* out, const BandRead& read);

}  // namespace sw::tiled

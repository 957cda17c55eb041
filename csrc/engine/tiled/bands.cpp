// Tile-by-tile direct operations (bands.hpp).
#include "tiled/bands.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>

namespace sw::tiled {

namespace K = kernels;

namespace {

bool is_elementwise(BandKind k) { return k != BandKind::Sum; }

Bands cut(const BandWork& w) {
  Bands b;
  b.leaves = w.split.leaves;
  b.sub = b.leaves;
  const int64_t tiles = static_cast<int64_t>(w.split.offsets.size());
  if (w.kind == BandKind::Sum || tiles < 2) return b;
  const K::Leaves& l = w.split.leaves[0];
  size_t j = l.size();
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i].extent > 1) j = i;
  if (j == l.size()) return b;
  const int64_t e = l[j].extent;
  for (int64_t d = std::min(e, tiles); d > 1; --d) {
    if (e % d == 0) {
      b.count = d;
      break;
    }
  }
  b.leaf = j;
  const int64_t eb = e / b.count;
  for (K::Leaves& lv : b.leaves) lv[j].extent = eb;
  const int64_t band_bytes = w.out.size() / b.count * static_cast<int64_t>(itemsize(w.dtype));
  const int64_t want = std::max<int64_t>(1, band_bytes / (256 << 10));
  for (int64_t d = std::min(eb, want); d > 1; --d) {
    if (eb % d == 0) {
      b.subs = d;
      break;
    }
  }
  b.sub = b.leaves;
  for (K::Leaves& lv : b.sub) lv[j].extent = eb / b.subs;
  return b;
}

// The output's layout over shape: MulGradSum's sums run over the broadcast
// coordinates (stride 0 where they sum).
// A layout broadcast to shape, when it can be.
bool broadcast(const Layout& l, const IntTree& shape, Layout* out) {
  if (!congruent(l.shape(), shape)) return false;
  const std::vector<int64_t> have = l.shape().leaves(), want = shape.leaves();
  for (size_t i = 0; i < have.size(); ++i)
    if (have[i] != want[i] && have[i] != 1) return false;
  *out = l.broadcast_to(shape);
  return true;
}

bool out_view(const BandWork& w, const IntTree& shape, Layout* view) {
  if (w.kind == BandKind::MulGradSum) return broadcast(w.out, shape, view);
  *view = w.out;
  return view->shape() == shape;
}

}  // namespace

bool plan_bands(BandWork& w, const IntTree& shape) {
  std::vector<Layout> views(w.ops.size() + 1);
  std::vector<const Layout*> layouts;
  w.readers = 0;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const BandOperand& o = w.ops[i];
    if (o.tiled && !(o.layout.shape() == shape)) return false;
    if (!broadcast(o.layout, shape, &views[i])) return false;
    layouts.push_back(&views[i]);
    if (o.tiled) w.readers = std::max(w.readers, o.reader + 1);
  }
  if (is_elementwise(w.kind)) {
    if (!out_view(w, shape, &views[w.ops.size()])) return false;
    layouts.push_back(&views[w.ops.size()]);
  }
  if (w.readers == 0 || shape.is_leaf || shape.children.size() != w.tile.size()) return false;
  std::optional<TileSplit> split = split_tiles(layouts, w.tile, w.grid);
  if (!split) return false;
  w.split = std::move(*split);
  // A tile of one slot per mode (tile_shape all ones) has no within-tile
  // leaf: one of extent 1 stands for it (the bands index a leaf).
  for (K::Leaves& l : w.split.leaves)
    if (l.empty()) l.push_back({1, 0});
  w.T = 1;
  for (int64_t e : w.tile) w.T *= e;
  // Every tiled operand's tile k lies in carrier tile k (the footprint rule
  // guarantees it; checked, not assumed).
  for (size_t i = 0; i < w.ops.size(); ++i) {
    if (!w.ops[i].tiled) continue;
    const auto [lo, hi] = leaf_reach(w.split.leaves[i]);
    for (size_t k = 0; k < w.split.offsets.size(); ++k) {
      const int64_t first = w.ops[i].offset + w.split.offsets[k][i];
      const int64_t base = static_cast<int64_t>(k) * w.T;
      if (first + lo < base || first + hi >= base + w.T) return false;
    }
  }
  w.bands = cut(w);
  return true;
}

bool tile_order_sums(const BandWork& w) {
  const size_t out = w.ops.size();
  bool within = false;
  for (const LeafMode& m : w.split.leaves[out]) within = within || (m.stride == 0 && m.extent > 1);
  std::vector<int64_t> firsts;
  for (const std::vector<int64_t>& o : w.split.offsets) firsts.push_back(o[out]);
  std::sort(firsts.begin(), firsts.end());
  const bool across = std::adjacent_find(firsts.begin(), firsts.end()) != firsts.end();
  return !(within && across);
}

bool run_bands(const BandWork& w, void* data, const BandRead& read) {
  const Bands& bands = w.bands;
  const int nops = static_cast<int>(w.ops.size());
  const size_t item = itemsize(w.dtype);
  char* out = static_cast<char*>(data);
  const K::Leaves& lo = w.kind == BandKind::Sum ? bands.sub[0] : bands.sub[nops];
  const K::Leaves& l0 = bands.sub[0];
  const size_t jl = bands.leaf;
  // Within-band reach of each operand's leaves: a tiled operand reads the
  // slots between.
  std::vector<std::pair<int64_t, int64_t>> reach;
  for (int i = 0; i < nops; ++i) reach.push_back(leaf_reach(bands.leaves[i]));
  double fsum = 0;
  int64_t isum = 0;
  // MulGradSum: the products of a tile (rounded to binary32, compact) and
  // the double sums of every gradient slot, rounded once at the end: what
  // mul_broadcast_backward computes over the whole tensor.
  std::vector<double> acc;
  std::vector<float> prod;
  K::Leaves lc;
  if (w.kind == BandKind::MulGradSum) {
    acc.assign(static_cast<size_t>(w.out_slots), 0.0);
    int64_t stride = 1;
    for (const LeafMode& m : l0) {
      lc.push_back({m.extent, stride});
      stride *= m.extent;
    }
    prod.resize(static_cast<size_t>(stride));
  }
  const size_t tiles = w.split.offsets.size();
  // Per reader, per tile of the chunk last read: the span's address and its
  // first slot relative to the tile's first slot.
  std::vector<std::vector<const char*>> at(static_cast<size_t>(w.readers), std::vector<const char*>(tiles));
  std::vector<std::vector<int64_t>> first(static_cast<size_t>(w.readers), std::vector<int64_t>(tiles));
  // rel(i, k, b): operand i's first index of band b of tile k, relative to
  // the tile's first slot (tiled) or to the operand's offset (dense); i ==
  // nops is the output.
  const auto rel = [&](int i, size_t k, int64_t b) {
    const int64_t band_off = b * bands.leaves[i][jl].extent * w.split.leaves[i][jl].stride;
    return w.split.offsets[k][i] + band_off +
           (i < nops && w.ops[i].tiled ? w.ops[i].offset - static_cast<int64_t>(k) * w.T : 0);
  };
  std::vector<const char*> got;
  for (int64_t b = 0; b < bands.count; ++b) {
    size_t k0 = 0;
    while (k0 < tiles) {
      // A chunk of tiles whose spans together stay within about one tile.
      size_t k1 = k0;
      int64_t held = 0;
      std::vector<std::vector<std::array<int64_t, 3>>> per(static_cast<size_t>(w.readers));
      while (k1 < tiles) {
        int64_t add = 0;
        std::vector<std::array<int64_t, 3>> mine(static_cast<size_t>(w.readers));
        for (int r = 0; r < w.readers; ++r) {
          int64_t lo_ = INT64_MAX, end = INT64_MIN;
          for (int i = 0; i < nops; ++i) {
            if (!w.ops[i].tiled || w.ops[i].reader != r) continue;
            lo_ = std::min(lo_, rel(i, k1, b) + reach[i].first);
            end = std::max(end, rel(i, k1, b) + reach[i].second + 1);
          }
          mine[r] = {static_cast<int64_t>(k1), lo_, end - lo_};
          add = std::max(add, end - lo_);
        }
        if (k1 > k0 && held + add > w.T) break;
        held += add;
        for (int r = 0; r < w.readers; ++r) per[r].push_back(mine[r]);
        ++k1;
      }
      for (int r = 0; r < w.readers; ++r) {
        if (!read(r, per[r], &got)) return false;
        for (size_t j = 0; j < per[r].size(); ++j) {
          const size_t k = static_cast<size_t>(per[r][j][0]);
          at[r][k] = got[j];
          first[r][k] = per[r][j][1];
        }
      }
      for (int64_t sb = 0; sb < bands.subs; ++sb) {
        for (size_t k = k0; k < k1; ++k) {
          const auto src = [&](int i) -> const void* {
            const int64_t sub_off = sb * l0[jl].extent * w.split.leaves[i][jl].stride;
            const BandOperand& o = w.ops[i];
            if (o.tiled)
              return at[o.reader][k] + (rel(i, k, b) + sub_off - first[o.reader][k]) * static_cast<int64_t>(item);
            return o.host + (o.offset + rel(i, k, b) + sub_off) * static_cast<int64_t>(item);
          };
          void* dst = nullptr;
          int64_t off = 0;
          if (w.kind != BandKind::Sum) {
            off = rel(nops, k, b) + sb * lo[jl].extent * w.split.leaves[nops][jl].stride;
            dst = out + off * static_cast<int64_t>(item);
          }
          switch (w.kind) {
            case BandKind::Add: K::add(w.dtype, src(0), l0, src(1), bands.sub[1], dst, lo); break;
            case BandKind::Mul: K::mul(w.dtype, src(0), l0, src(1), bands.sub[1], dst, lo); break;
            case BandKind::MulScalar:
              if (w.dtype == DTypeCode::Float32)
                K::mul_scalar_f32(static_cast<const float*>(src(0)), l0, w.scalar_f, static_cast<float*>(dst), lo);
              else
                K::mul_scalar_i32(static_cast<const int32_t*>(src(0)), l0, w.scalar_i, static_cast<int32_t*>(dst), lo);
              break;
            case BandKind::Relu: K::relu(w.dtype, src(0), l0, dst, lo); break;
            case BandKind::Sum:
              if (w.dtype == DTypeCode::Float32) fsum += K::sum_f32(static_cast<const float*>(src(0)), l0);
              else isum += K::sum_i32(static_cast<const int32_t*>(src(0)), l0);
              break;
            case BandKind::ReluGrad:  // (relu_grad_host's kernel: g where x > 0)
              K::relu_backward(static_cast<const float*>(src(0)), l0, static_cast<const float*>(src(1)), bands.sub[1],
                               static_cast<float*>(dst), lo);
              break;
            case BandKind::MulGrad:  // (mul_grad_host's kernel when nothing is summed: g * other)
              K::mul(DTypeCode::Float32, src(0), l0, src(1), bands.sub[1], dst, lo);
              break;
            case BandKind::MulGradSum:
              K::mul(DTypeCode::Float32, src(0), l0, src(1), bands.sub[1], prod.data(), lc);
              K::sum_into(prod.data(), lc, acc.data() + off, lo);
              break;
          }
        }
      }
      k0 = k1;
    }
  }
  if (w.kind == BandKind::MulGradSum) K::round_to_f32(acc.data(), static_cast<float*>(data), w.out_slots);
  if (w.kind == BandKind::Sum) {
    if (w.dtype == DTypeCode::Float32) {
      *static_cast<float*>(data) = static_cast<float>(fsum);
    } else {
      if (isum < INT32_MIN || isum > INT32_MAX) throw std::overflow_error("Int32 result out of range");
      *static_cast<int32_t*>(data) = static_cast<int32_t>(isum);
    }
  }
  return true;
}

}  // namespace sw::tiled

// GoogleTest for tile-by-tile direct operations (tiled/bands.hpp): the
// plan's refusals, and run_bands against the dense kernels over the whole
// tensor, reading a chunk of tiles at a time from a vector standing in for
// the tiled carrier.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "layout/algebra.hpp"
#include "tiled/bands.hpp"
#include "builders.hpp"

using sw::DTypeCode;
using sw::IntTree;
using sw::Layout;
using sw::tiled::BandKind;
using sw::tiled::BandOperand;
using sw::tiled::BandWork;
namespace K = sw::kernels;

namespace {

// The "tiles" layout of a full tensor: mode i (tile_i, grid_i).
Layout tiles_layout(const std::vector<int64_t>& grid, const std::vector<int64_t>& tile) {
  std::vector<IntTree> shape, stride;
  int64_t T = 1;
  for (int64_t t : tile) T *= t;
  int64_t inner = 1, outer = T;
  for (size_t i = 0; i < grid.size(); ++i) {
    shape.push_back(swtest::node({tile[i], grid[i]}));
    stride.push_back(swtest::node({inner, outer}));
    inner *= tile[i];
    outer *= grid[i];
  }
  return Layout(IntTree::node(shape), IntTree::node(stride));
}

// Reads spans out of the tiled carrier v, counting the largest chunk.
struct Source {
  const std::vector<float>* v;
  int64_t T;
  int64_t most = 0;
  int calls = 0;
  bool operator()(int, const std::vector<std::array<int64_t, 3>>& spans, std::vector<const char*>* at) {
    at->clear();
    int64_t held = 0;
    for (const auto& s : spans) {
      EXPECT_GE(s[1], 0);
      EXPECT_LE(s[1] + s[2], T);
      held += s[2];
      at->push_back(reinterpret_cast<const char*>(v->data() + s[0] * T + s[1]));
    }
    most = std::max(most, held);
    ++calls;
    return true;
  }
};

BandWork work(BandKind kind, const std::vector<int64_t>& grid, const std::vector<int64_t>& tile) {
  BandWork w;
  w.kind = kind;
  w.grid = grid;
  w.tile = tile;
  return w;
}

}  // namespace

TEST(TiledBands, ElementwiseResultsMatchTheDenseKernels) {
  const std::vector<int64_t> grid = {3, 4}, tile = {8, 16};
  const Layout full = tiles_layout(grid, tile);
  const int64_t n = full.size(), T = 128;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  std::iota(x.begin(), x.end(), -100.0f);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 7) - 3.0f;
  const Layout out = sw::compact(full.shape());
  for (BandKind kind : {BandKind::Add, BandKind::Mul, BandKind::Relu, BandKind::MulScalar}) {
    BandWork w = work(kind, grid, tile);
    w.ops.push_back({full, true, 0, 0, nullptr});
    if (kind == BandKind::Add || kind == BandKind::Mul)
      w.ops.push_back({out, false, -1, 0, reinterpret_cast<const char*>(y.data())});
    w.out = out;
    w.out_slots = out.size();
    w.scalar_f = 1.5;
    ASSERT_TRUE(sw::tiled::plan_bands(w, full.shape()));
    EXPECT_GT(w.bands.count, 1);  // bands of every tile
    std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    Source src{&x, T};
    ASSERT_TRUE(sw::tiled::run_bands(w, got.data(), std::ref(src)));
    EXPECT_LE(src.most, T);  // about one tile held at once
    switch (kind) {
      case BandKind::Add: K::add(DTypeCode::Float32, x.data(), full.leaves(), y.data(), out.leaves(), want.data(), out.leaves()); break;
      case BandKind::Mul: K::mul(DTypeCode::Float32, x.data(), full.leaves(), y.data(), out.leaves(), want.data(), out.leaves()); break;
      case BandKind::Relu: K::relu(DTypeCode::Float32, x.data(), full.leaves(), want.data(), out.leaves()); break;
      default: K::mul_scalar_f32(x.data(), full.leaves(), 1.5, want.data(), out.leaves()); break;
    }
    EXPECT_EQ(got, want);
  }
}

TEST(TiledBands, ReduceSumAndInt32Overflow) {
  const std::vector<int64_t> grid = {5}, tile = {7};
  const Layout full = tiles_layout(grid, tile);
  std::vector<float> x(35);
  std::iota(x.begin(), x.end(), 1.0f);
  BandWork w = work(BandKind::Sum, grid, tile);
  w.ops.push_back({full, true, 0, 0, nullptr});
  ASSERT_TRUE(sw::tiled::plan_bands(w, full.shape()));
  float s = 0;
  Source src{&x, 7};
  ASSERT_TRUE(sw::tiled::run_bands(w, &s, std::ref(src)));
  EXPECT_EQ(s, 630.0f);
  std::vector<int32_t> big(35, 1 << 30);
  BandWork wi = w;
  wi.dtype = DTypeCode::Int32;
  int32_t r = 0;
  auto read = [&](int, const std::vector<std::array<int64_t, 3>>& spans, std::vector<const char*>* at) {
    at->clear();
    for (const auto& sp : spans) at->push_back(reinterpret_cast<const char*>(big.data() + sp[0] * 7 + sp[1]));
    return true;
  };
  EXPECT_THROW(sw::tiled::run_bands(wi, &r, read), std::overflow_error);
}

TEST(TiledBands, AFailedReadStopsTheWork) {
  const std::vector<int64_t> grid = {4}, tile = {4};
  const Layout full = tiles_layout(grid, tile);
  BandWork w = work(BandKind::Relu, grid, tile);
  w.ops.push_back({full, true, 0, 0, nullptr});
  w.out = sw::compact(full.shape());
  w.out_slots = 16;
  ASSERT_TRUE(sw::tiled::plan_bands(w, full.shape()));
  std::vector<float> out(16);
  EXPECT_FALSE(sw::tiled::run_bands(w, out.data(), [](int, const auto&, std::vector<const char*>*) { return false; }));
}

TEST(TiledBands, WhatCannotRunTileByTile) {
  const std::vector<int64_t> grid = {2, 2}, tile = {2, 3};
  const Layout full = tiles_layout(grid, tile);
  // a mode whose leaves do not split at the tile extent
  const Layout odd(IntTree::node({swtest::node({4}), swtest::node({3, 2})}),
                   IntTree::node({swtest::node({1}), swtest::node({8, 4})}));
  BandWork w = work(BandKind::Relu, grid, tile);
  w.ops.push_back({odd, true, 0, 0, nullptr});
  w.out = sw::compact(odd.shape());
  EXPECT_FALSE(sw::tiled::plan_bands(w, odd.shape()));
  // a tiled operand broadcast to a larger shape
  BandWork b = work(BandKind::Add, grid, tile);
  b.ops.push_back({full, true, 0, 0, nullptr});
  b.ops.push_back({full, false, -1, 0, nullptr});
  b.out = sw::compact(full.shape());
  const IntTree bigger = IntTree::node({swtest::node({2, 4}), swtest::node({3, 2})});
  EXPECT_FALSE(sw::tiled::plan_bands(b, bigger));
  // no tiled operand at all
  BandWork d = work(BandKind::Relu, grid, tile);
  d.ops.push_back({full, false, -1, 0, nullptr});
  d.out = sw::compact(full.shape());
  EXPECT_FALSE(sw::tiled::plan_bands(d, full.shape()));
}

TEST(TiledBands, SummedGradientsKeepTheDenseOrderOnlyInOneDirection) {
  // The gradient of an operand broadcast within the tiles (one value per
  // tile) sums within tiles only; one broadcast across tiles (shared by
  // every tile) sums across only; a single number sums both ways.
  const std::vector<int64_t> grid = {4}, tile = {8};
  const Layout full = tiles_layout(grid, tile);
  const auto grad_work = [&](const Layout& gradient_layout) {
    BandWork w = work(BandKind::MulGradSum, grid, tile);
    w.ops.push_back({sw::compact(full.shape()), false, -1, 0, nullptr});  // the cotangent
    w.ops.push_back({full, true, 0, 0, nullptr});                         // the tiled input
    w.out = gradient_layout;
    w.out_slots = gradient_layout.cosize();
    EXPECT_TRUE(sw::tiled::plan_bands(w, full.shape()));
    return w;
  };
  const Layout per_tile(IntTree::node({swtest::node({1, 4})}), IntTree::node({swtest::node({0, 1})}));
  const Layout shared(IntTree::node({swtest::node({8, 1})}), IntTree::node({swtest::node({1, 0})}));
  const Layout one(IntTree::node({swtest::node({1, 1})}), IntTree::node({swtest::node({0, 0})}));
  EXPECT_TRUE(sw::tiled::tile_order_sums(grad_work(per_tile)));
  EXPECT_TRUE(sw::tiled::tile_order_sums(grad_work(shared)));
  EXPECT_FALSE(sw::tiled::tile_order_sums(grad_work(one)));
}

TEST(TiledBands, TilesOfOneSlotRunToo) {
  // tile_shape all ones: no within-tile leaf (this crashed the loop)
  for (const auto& [grid, tile] : {std::make_pair(std::vector<int64_t>{2}, std::vector<int64_t>{1}),
                                   std::make_pair(std::vector<int64_t>{3, 2}, std::vector<int64_t>{1, 1})}) {
    const Layout full = tiles_layout(grid, tile);
    std::vector<float> x(static_cast<size_t>(full.size()));
    std::iota(x.begin(), x.end(), -1.0f);
    for (BandKind kind : {BandKind::Relu, BandKind::Sum}) {
      BandWork w = work(kind, grid, tile);
      w.ops.push_back({full, true, 0, 0, nullptr});
      w.out = kind == BandKind::Sum ? sw::compact(IntTree::node({})) : sw::compact(full.shape());
      w.out_slots = w.out.size();
      ASSERT_TRUE(sw::tiled::plan_bands(w, full.shape()));
      std::vector<float> got(x.size() + 1, -7.0f);
      Source src{&x, 1};
      ASSERT_TRUE(sw::tiled::run_bands(w, got.data(), std::ref(src)));
      if (kind == BandKind::Sum) {
        EXPECT_EQ(got[0], std::accumulate(x.begin(), x.end(), 0.0f));
      } else {
        for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], std::max(x[i], 0.0f));
      }
    }
  }
}

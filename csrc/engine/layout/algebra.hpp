// The layout algebra: free functions over layouts and leaf lists, named as
// CuTe names them (compact, coalesce, logical_divide, zipped_divide), the
// broadcasting rules of elementwise operations and the gradient layout rules
// of autograd. The Layout type itself is layout/layout.hpp.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "layout/layout.hpp"

namespace sw {

// The compact layout of shape: each leaf's stride is the product of the
// extents of all earlier leaves, depth-first (first mode fastest), so the
// flat ordinal of a coordinate is its index. Throws std::invalid_argument for
// a bare leaf, an extent < 1 or a size that overflows int64.
Layout compact(const IntTree& shape);
// The same strides for a leaf list (one implementation for both).
std::vector<LeafMode> compact(const std::vector<LeafMode>& leaves);

// The flat layout with the same size and index function: extent-1 leaves
// dropped and each leaf merged into its faster neighbour when
// stride_{i+1} == extent_i * stride_i. A size-1 layout coalesces to the
// rank-0 layout ():(). The leaf-list form throws std::invalid_argument for an
// extent < 1.
Layout coalesce(const Layout& layout);
std::vector<LeafMode> coalesce(const std::vector<LeafMode>& leaves);

// True when some leaf of extent > 1 has stride 0 (a broadcast mode), so
// some index repeats; never for leaves with an extent 0 (no index at all).
bool has_stride_zero(const std::vector<LeafMode>& leaves);
// Product of the extents (1 for an empty list); not overflow checked (leaf
// lists of a Layout fit int64).
int64_t size_of(const std::vector<LeafMode>& leaves);
// Leaves over the extents of leaves that read one slot at every coordinate
// (stride 0 throughout): a single value broadcast to those extents.
std::vector<LeafMode> broadcast_one(const std::vector<LeafMode>& leaves);
// Scalar index of every coordinate, first leaf fastest.
std::vector<int64_t> coordinate_indices(const std::vector<LeafMode>& leaves);

// The shape both operands of an elementwise operation widen to: congruent
// trees whose leaf extents agree or are 1. Throws std::invalid_argument
// naming the first disagreement.
IntTree broadcast_shapes(const IntTree& a, const IntTree& b);

// Iteration leaves that sum a cotangent of layout g onto the gradient
// layout target of an input of layout x (target congruent with x): target's
// strides, with stride 0 on the leaves where x has extent 1 and g does not
// (the leaves a broadcast widened). Extents are g's. Throws
// std::invalid_argument("the gradient's shape does not match the input's
// shape") when x's shape cannot have been broadcast to g's.
std::vector<LeafMode> reduction_leaves(const Layout& g, const Layout& x, const Layout& target);

// The layout of a tensor's gradient: the tensor's own layout when it is
// injective, else the compact layout of its shape.
Layout gradient_layout(const Layout& layout);

// How a cotangent layout g fits a tensor's layout target (the cotangent
// layout contract): same shape, and g == target when target is injective,
// else any injective g.
enum class CotangentFit { Ok, ShapeDiffers, NotOwnLayout, NotInjective };
CotangentFit cotangent_fit(const Layout& target, const Layout& g);

// ------------------------------------------------ division by a tiler (CuTe's
// logical_divide / zipped_divide for a tiler of one extent per top-level mode)
//
// Dividing mode i (its leaves, first fastest) by the extent n cuts it into
// the layout of its first n ordinals (the tile) and the layout of the
// ordinals' multiples of n (which tile): f(q * n + y) = tile(y) + rest(q) for
// every y < n. That needs a leaf boundary at ordinal n, cutting at most one
// leaf in two (CuTe's divisibility condition for composing with n:1); the
// leaves are coalesced first, so any layout with the same index function
// divides alike. Both parts come back coalesced; an empty part is (1):(0).

// The two parts of leaves divided at ordinal n, or nullopt when no leaf
// boundary (after cutting one leaf) falls at n. n >= 1.
std::optional<std::pair<std::vector<LeafMode>, std::vector<LeafMode>>> divide_leaves(
    const std::vector<LeafMode>& leaves, int64_t n);

// Mode i becomes the rank-2 mode (tile_i, rest_i). Throws
// std::invalid_argument when the tiler's rank is not the layout's rank, an
// extent is < 1 or does not divide its mode's size, or a mode has no leaf
// boundary at its extent (the message names the mode).
Layout logical_divide(const Layout& layout, const std::vector<int64_t>& tiler);
// The same parts gathered as ((tile_0, ..., tile_{r-1}), (rest_0, ...,
// rest_{r-1})): mode 0 indexes within a tile, mode 1 picks the tile.
Layout zipped_divide(const Layout& layout, const std::vector<int64_t>& tiler);

}  // namespace sw

// Hierarchical (CuTe-style) shape/stride trees and the layout math on them.
// Coordinates are first-mode-fastest (colexicographic) at every level, so a
// flat ordinal decomposes over the depth-first list of leaf modes with the
// first leaf fastest.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layout/iter.hpp"

namespace sw {

// A node of a shape or stride tree. The root of a Shape/Stride is always a
// node (its children are the top-level modes); Shape() has no children.
struct IntTree {
  bool is_leaf = false;
  int64_t value = 0;               // leaf only
  std::vector<IntTree> children;   // node only

  static IntTree leaf(int64_t v) { IntTree t; t.is_leaf = true; t.value = v; return t; }
  static IntTree node(std::vector<IntTree> c) { IntTree t; t.is_leaf = false; t.children = std::move(c); return t; }

  bool operator==(const IntTree& o) const = default;
  // Nesting depth of a node: [2,3] -> 1, [2,[3,4]] -> 2, [[2,[3]],4] -> 3;
  // the rank-0 root [] -> 1 (it is still a tuple); a leaf -> 0.
  int depth() const;
  // Depth-first leaf values.
  void collect_leaves(std::vector<int64_t>& out) const;
  std::vector<int64_t> leaves() const { std::vector<int64_t> v; collect_leaves(v); return v; }
  // Product of leaf values (1 for an empty tree). Throws std::overflow_error
  // when the product does not fit int64.
  int64_t product() const;
};

// Python-tuple style text of a tree: "(2, (3, 4))", "(5,)", "()"; a bare
// leaf is its number. Used in error messages and reprs.
std::string to_string(const IntTree& t);
// Empty when a and b are congruent; otherwise a description of the first
// mismatch ("mode 1: shape has 2 sub-modes but stride has 3").
std::string congruence_mismatch(const IntTree& shape, const IntTree& stride);
// Scalar index of a colexicographic ordinal within the mode (shape, stride)
// (congruent, validated); precondition 0 <= ordinal < shape.product().
int64_t tree_index_of_ordinal(const IntTree& shape, const IntTree& stride, int64_t ordinal);

// Same tree profile (node/leaf structure and child counts).
bool congruent(const IntTree& a, const IntTree& b);

class Layout {
 public:
  Layout() = default;
  // Throws std::invalid_argument (message names the mismatch) when the trees
  // are not congruent, an extent < 0 or a stride < 0. Shape objects refuse
  // extent 0, so only an imported zero-size array (DLPack) has such a mode:
  // size and cosize are then 0.
  Layout(IntTree shape, IntTree stride);

  const IntTree& shape() const { return shape_; }
  const IntTree& stride() const { return stride_; }
  const std::vector<LeafMode>& leaves() const { return leaves_; }

  int64_t size() const { return size_; }
  // 1 + sum over leaves of stride * (extent - 1); >= 1 except for a layout
  // with an extent-0 mode (size 0), whose cosize is 0.
  int64_t cosize() const { return cosize_; }
  // Exact for every layout whose size or reduced span is below a few million
  // (see layout.cpp); beyond that budget it answers false only for layouts
  // it cannot prove injective (conservative, documented in layout.cpp).
  bool is_injective() const;
  // Scalar index of the flat (colexicographic) ordinal; precondition
  // 0 <= ordinal < size().
  int64_t index_of_ordinal(int64_t ordinal) const;
  // True when some leaf of extent > 1 has stride 0 (a broadcast mode);
  // extent-1 leaves never repeat an index, whatever their stride.
  bool has_stride_zero() const;

  // The compact layout of shape (see compact below); Python's
  // Layout.canonical.
  static Layout canonical(const IntTree& shape);
  // The layout whose top-level modes are these leaves, in order (a flat
  // shape); validated like the constructor.
  static Layout flat(std::vector<LeafMode> leaves);
  // Widen extent-1 leaves to the target extent with stride 0. Throws
  // std::invalid_argument when the profile differs or a non-1 extent differs.
  Layout broadcast_to(const IntTree& target_shape) const;

  bool operator==(const Layout& o) const { return shape_ == o.shape_ && stride_ == o.stride_; }

 private:
  // size_ and cosize_ from leaves_, with the extent, stride and overflow
  // checks of the constructor.
  void measure();
  IntTree shape_, stride_;
  std::vector<LeafMode> leaves_;
  int64_t size_ = 1;
  int64_t cosize_ = 1;
};

// ------------------------------------------------ layout algebra (free functions,
// named as CuTe names them; layout_algebra.cpp)

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

// True when some leaf of extent > 1 has stride 0 (a broadcast mode).
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

// Calls f(ordinal, index) for every coordinate in colexicographic order (a
// thin wrapper over the walker of layout_iter.hpp).
template <class F>
void for_each_index(const std::vector<LeafMode>& leaves, F&& f) {
  int64_t ordinal = 0;
  walk(joint_modes<1>({&leaves}), [&](const Indices<1>& i) { f(ordinal++, i[0]); });
}

}  // namespace sw

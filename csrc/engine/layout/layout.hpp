// Hierarchical (CuTe-style) shape/stride trees and the Layout over them (size,
// cosize, index, injectivity); the free functions of the layout algebra are
// layout/algebra.hpp.
// Coordinates are first-mode-fastest (colexicographic) at every level, so a
// flat ordinal decomposes over the depth-first list of leaf modes with the
// first leaf fastest.
#pragma once
#include <cstdint>
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
  // extent 0, so only an empty tensor's layout (a zero-size DLPack import, a
  // constructor or tensor() with an extent 0) has such a mode: size and
  // cosize are then 0.
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
  // extent-1 leaves never repeat an index, whatever their stride, and a
  // zero-size layout (an extent-0 leaf) has none to repeat.
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

}  // namespace sw

// Hierarchical (CuTe-style) shape/stride trees and the layout math on them.
// Coordinates are first-mode-fastest (colexicographic) at every level, so a
// flat ordinal decomposes over the depth-first list of leaf modes with the
// first leaf fastest.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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

struct LeafMode {
  int64_t extent;
  int64_t stride;
  bool operator==(const LeafMode& o) const = default;
};

class Layout {
 public:
  Layout() = default;
  // Throws std::invalid_argument (message names the mismatch) when the trees
  // are not congruent, an extent < 1 or a stride < 0.
  Layout(IntTree shape, IntTree stride);

  const IntTree& shape() const { return shape_; }
  const IntTree& stride() const { return stride_; }
  const std::vector<LeafMode>& leaves() const { return leaves_; }

  int64_t size() const { return size_; }
  // 1 + sum over leaves of stride * (extent - 1); always >= 1.
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

  // Compact injective layout: each leaf's stride is the product of the
  // extents of all earlier leaves, depth-first.
  static Layout canonical(const IntTree& shape);
  // Widen extent-1 leaves to the target extent with stride 0. Throws
  // std::invalid_argument when the profile differs or a non-1 extent differs.
  Layout broadcast_to(const IntTree& target_shape) const;

  bool operator==(const Layout& o) const { return shape_ == o.shape_ && stride_ == o.stride_; }

 private:
  IntTree shape_, stride_;
  std::vector<LeafMode> leaves_;
  int64_t size_ = 1;
  int64_t cosize_ = 1;
};

// Calls f(ordinal, index) for every coordinate in colexicographic order.
template <class F>
void for_each_index(const std::vector<LeafMode>& leaves, F&& f) {
  int64_t total = 1;
  for (const auto& m : leaves) total *= m.extent;
  if (total == 0) return;
  const size_t n = leaves.size();
  std::vector<int64_t> coord(n, 0);
  int64_t index = 0;
  for (int64_t ord = 0; ord < total; ++ord) {
    f(ord, index);
    for (size_t d = 0; d < n; ++d) {
      if (++coord[d] < leaves[d].extent) { index += leaves[d].stride; break; }
      index -= leaves[d].stride * (leaves[d].extent - 1);
      coord[d] = 0;
    }
  }
}

}  // namespace sw

// The shape side of strideweave.tensor(data) (data/shape.hpp).
#include "data/shape.hpp"

namespace sw::data {

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::string position_text(std::span<const int64_t> shape, int64_t ordinal) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k > 0; --k) {
    idx[k - 1] = ordinal % shape[k - 1];
    ordinal /= shape[k - 1];
  }
  return shape_text(idx);
}

bool extents_non_negative(std::span<const int64_t> shape) noexcept {
  for (int64_t e : shape)
    if (e < 0) return false;
  return true;
}

int64_t element_count(std::span<const int64_t> shape) noexcept {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// ------------------------------------------------------------ NestedShape

NestedShape::Step NestedShape::begin_level() const noexcept {
  const int depth = static_cast<int>(path_.size());
  if (leaf_depth_ >= 0 && depth >= leaf_depth_) return Step::SequenceWhereNumber;
  if (depth >= kMaxRank) return Step::TooDeep;
  return Step::Ok;
}

NestedShape::Step NestedShape::level_length(int64_t len) {
  const size_t depth = path_.size();
  if (shape_.size() == depth) shape_.push_back(len);
  else if (shape_[depth] != len) return Step::LengthMismatch;
  if (len != 0) return Step::Ok;
  // The first empty level at this depth (a later one matched its length 0):
  // no level was deeper yet, so no leaf depth is fixed.
  if (leaf_depth_ < 0) leaf_depth_ = static_cast<int>(depth) + 1;
  return Step::ZeroExtent;
}

NestedShape::Step NestedShape::leaf() {
  const int depth = static_cast<int>(path_.size());
  if (leaf_depth_ < 0) leaf_depth_ = depth;
  else if (leaf_depth_ != depth) return Step::NumberWhereSequence;
  return Step::Ok;
}

std::string NestedShape::ragged_text(Step step, int64_t len) const {
  const std::string what =
      step == Step::LengthMismatch
          ? "length " + std::to_string(len) + " instead of " + std::to_string(shape_[path_.size()])
          : step == Step::SequenceWhereNumber ? "a sequence where a number was expected"
                                              : "a number where a sequence was expected";
  return what + " at index " + shape_text(path_) + " (shape so far " + shape_text(shape_) + ")";
}

// ------------------------------------------------------------ dtypes

DTypeCode inferred_dtype(LeafKind widest) noexcept {
  switch (widest) {
    case LeafKind::Float: return DTypeCode::Float32;
    case LeafKind::Int: return DTypeCode::Int32;
    default: return DTypeCode::Bool;
  }
}

const char* kind_text(ScalarKind kind) noexcept {
  switch (kind) {
    case ScalarKind::Bool: return "bool";
    case ScalarKind::Signed: return "signed integer";
    case ScalarKind::Unsigned: return "unsigned integer";
    default: return "floating";
  }
}

// ------------------------------------------------------------ placement

Layout row_major(std::span<const int64_t> shape, Placement* out) {
  out->strides.assign(shape.size(), 1);
  for (size_t k = shape.size(); k > 1; --k) out->strides[k - 2] = out->strides[k - 1] * shape[k - 1];
  std::vector<IntTree> s, d;
  s.reserve(shape.size());
  d.reserve(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    s.push_back(IntTree::leaf(shape[k]));
    d.push_back(IntTree::leaf(out->strides[k]));
  }
  Layout l(IntTree::node(std::move(s)), IntTree::node(std::move(d)));
  out->cosize = l.cosize();
  out->compact = true;
  return l;
}

std::vector<int64_t> leaf_extents(const Layout& layout) {
  std::vector<int64_t> extents;
  extents.reserve(layout.leaves().size());
  for (const LeafMode& m : layout.leaves()) extents.push_back(m.extent);
  return extents;
}

LayoutFit fit_layout(const Layout& layout, std::span<const int64_t> shape, Placement* out) {
  const auto& leaves = layout.leaves();
  if (leaves.size() != shape.size()) return LayoutFit::ExtentsDiffer;
  for (size_t k = 0; k < shape.size(); ++k)
    if (leaves[k].extent != shape[k]) return LayoutFit::ExtentsDiffer;
  if (!layout.is_injective()) return LayoutFit::NotInjective;
  out->strides.clear();
  out->strides.reserve(leaves.size());
  for (const LeafMode& m : leaves) out->strides.push_back(m.stride);
  out->cosize = layout.cosize();
  out->compact = layout.cosize() == layout.size();
  return LayoutFit::Ok;
}

// ------------------------------------------------------------ RowMajorSlots

void RowMajorSlots::next() noexcept {
  for (size_t k = coord_.size(); k > 0; --k) {
    slot_ += strides_[k - 1];
    if (++coord_[k - 1] < shape_[k - 1]) return;
    slot_ -= strides_[k - 1] * shape_[k - 1];
    coord_[k - 1] = 0;
  }
}

}  // namespace sw::data

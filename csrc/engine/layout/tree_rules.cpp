// Shape/Stride/Layout object rules (layout/tree_rules.hpp).
#include "layout/tree_rules.hpp"

#include <stdexcept>

namespace sw {

const char* tree_kind_name(TreeKind kind) noexcept { return kind == TreeKind::Shape ? "Shape" : "Stride"; }

bool leaf_valid(TreeKind kind, int64_t value) noexcept {
  return kind == TreeKind::Shape ? value >= 1 : value >= 0;
}

std::string leaf_error(TreeKind kind, int64_t value) {
  return (kind == TreeKind::Shape ? "Shape extent must be >= 1, got " : "Stride must be >= 0, got ") +
         std::to_string(value);
}

const IntTree* first_invalid_leaf(TreeKind kind, const IntTree& t) noexcept {
  if (t.is_leaf) return leaf_valid(kind, t.value) ? nullptr : &t;
  for (const IntTree& c : t.children)
    if (const IntTree* bad = first_invalid_leaf(kind, c)) return bad;
  return nullptr;
}

bool nesting_too_deep(int depth, const IntTree& t) { return depth + t.depth() > kMaxTreeDepth; }

bool size_overflows(const IntTree& shape) {
  try {
    (void)shape.product();
    return false;
  } catch (const std::overflow_error&) {
    return true;
  }
}

IntTree select_modes(const IntTree& root, int64_t start, int64_t step, int64_t n) {
  std::vector<IntTree> sel;
  sel.reserve(static_cast<size_t>(n));
  for (int64_t k = 0, i = start; k < n; ++k, i += step) sel.push_back(root.children[static_cast<size_t>(i)]);
  return IntTree::node(std::move(sel));
}

Layout select_modes(const Layout& layout, int64_t start, int64_t step, int64_t n) {
  return Layout(select_modes(layout.shape(), start, step, n), select_modes(layout.stride(), start, step, n));
}

Layout mode_layout(const Layout& layout, size_t i) {
  const IntTree& s = layout.shape().children[i];
  const IntTree& d = layout.stride().children[i];
  if (s.is_leaf) return Layout(IntTree::node({s}), IntTree::node({d}));
  return Layout(s, d);
}

IntTree decode_ordinal(const IntTree& shape, int64_t ordinal) {
  if (shape.is_leaf) return IntTree::leaf(ordinal);
  std::vector<IntTree> parts;
  parts.reserve(shape.children.size());
  for (const IntTree& c : shape.children) {
    const int64_t extent = c.product();  // validated: fits int64
    parts.push_back(decode_ordinal(c, ordinal % extent));
    ordinal /= extent;
  }
  return IntTree::node(std::move(parts));
}

bool ordinal_in(const IntTree& shape, int64_t ordinal) { return ordinal >= 0 && ordinal < shape.product(); }

std::string tree_repr(const char* type_name, const IntTree& t) {
  return std::string(type_name) + "<" + to_string(t) + ">";
}

}  // namespace sw

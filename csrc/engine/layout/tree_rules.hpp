// The rules of Shape, Stride and Layout objects that need no Python (API.md
// section 2): which leaves a Shape or a Stride accepts, the nesting limit,
// the size limit, mode selection (indexing and slicing the top-level modes),
// Shape.decode's ordinal -> coordinate math, and the repr text.
#pragma once
#include <cstdint>
#include <string>

#include "layout/layout.hpp"

namespace sw {

enum class TreeKind : uint8_t { Shape, Stride };

// Nesting deeper than this many levels is refused (a self-referential list
// would otherwise recurse forever; the tree code is recursive).
inline constexpr int kMaxTreeDepth = 64;

// "Shape" or "Stride".
const char* tree_kind_name(TreeKind kind) noexcept;
// Shape extents are >= 1, Stride values >= 0.
bool leaf_valid(TreeKind kind, int64_t value) noexcept;
// The message for a leaf leaf_valid refuses ("Shape extent must be >= 1,
// got 0").
std::string leaf_error(TreeKind kind, int64_t value);
// The first leaf (depth first) of t that kind refuses, or nullptr (a tree
// copied from a Stride may hold 0 where a Shape needs >= 1).
const IntTree* first_invalid_leaf(TreeKind kind, const IntTree& t) noexcept;
// Whether nesting the tree t as a mode at depth (1 for a top-level mode)
// exceeds kMaxTreeDepth.
bool nesting_too_deep(int depth, const IntTree& t);
// Whether the product of the extents overflows int64 (Shape refuses that).
bool size_overflows(const IntTree& shape);

// The modes start, start + step, ... (n of them; indices already adjusted
// to the mode count as Python's slice.indices does) as a new root node.
IntTree select_modes(const IntTree& root, int64_t start, int64_t step, int64_t n);
// The same selection on both trees of a layout.
Layout select_modes(const Layout& layout, int64_t start, int64_t step, int64_t n);
// Top-level mode i (0 <= i < rank) as a Layout: a leaf mode (e):(s) becomes
// the rank-1 layout (e,):(s,).
Layout mode_layout(const Layout& layout, size_t i);

// Shape.decode: the coordinate of a colexicographic ordinal
// (0 <= ordinal < shape.product()) as a tree mirroring shape, its leaves the
// per-leaf coordinates.
IntTree decode_ordinal(const IntTree& shape, int64_t ordinal);
// Whether ordinal addresses an element of shape (size already validated).
bool ordinal_in(const IntTree& shape, int64_t ordinal);

// "Shape<(2, (3, 4))>" for type_name "Shape".
std::string tree_repr(const char* type_name, const IntTree& t);

}  // namespace sw

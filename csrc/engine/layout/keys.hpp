// Coordinate keys of a layout (API.md sections 2 and 11): the scalar index
// of a key that is a flat ordinal or a nested sequence of parts, one part per
// mode. The walk (which part goes with which mode, the bounds, the index
// sum) is here; reading a part is the caller's: a Reader turns a part into
// an int ordinal or a list of sub-parts, so a binding can convert lazily
// (a part's conversion may run user code) and stop at the first failure.
//
// Reader requirements (Part is the reader's part handle):
//   PartKind kind(Part p);               // Bad: the reader has reported why
//   KeyStatus ordinal(Part p, int64_t limit, int64_t* out);
//                                        // Ok with 0 <= *out < limit,
//                                        // Outside, or Error (reported)
//   bool items(Part p, Items* out);      // false: Error (reported); Items
//                                        // has size() and operator[](size_t)
//   using Items = ...;
#pragma once
#include <cstdint>

#include "layout/layout.hpp"

namespace sw {

enum class PartKind : uint8_t { Int, Sequence, Bad };
enum class KeyStatus : uint8_t { Ok, Outside, Error };

// Number of coordinates of a mode: a leaf's extent or a node's size
// (validated trees: no overflow).
inline int64_t mode_size(const IntTree& shape) { return shape.is_leaf ? shape.value : shape.product(); }

template <class Reader, class Part>
KeyStatus add_mode_index(Reader& r, Part part, const IntTree& shape, const IntTree& stride, int64_t* acc);

// A sequence part addresses a node mode with as many children as it has
// items, each item addressing its child.
template <class Reader, class Part>
KeyStatus add_sequence_index(Reader& r, Part part, const IntTree& shape, const IntTree& stride, int64_t* acc) {
  if (shape.is_leaf) return KeyStatus::Outside;
  typename Reader::Items items;
  if (!r.items(part, &items)) return KeyStatus::Error;
  if (items.size() != shape.children.size()) return KeyStatus::Outside;
  for (size_t i = 0; i < items.size(); ++i) {
    const KeyStatus st = add_mode_index(r, items[i], shape.children[i], stride.children[i], acc);
    if (st != KeyStatus::Ok) return st;
  }
  return KeyStatus::Ok;
}

// Adds the index of part, addressing the mode (shape, stride), to *acc: an
// int part is an ordinal within the mode.
template <class Reader, class Part>
KeyStatus add_mode_index(Reader& r, Part part, const IntTree& shape, const IntTree& stride, int64_t* acc) {
  switch (r.kind(part)) {
    case PartKind::Int: {
      int64_t ord;
      const KeyStatus st = r.ordinal(part, mode_size(shape), &ord);
      if (st == KeyStatus::Ok) *acc += tree_index_of_ordinal(shape, stride, ord);
      return st;
    }
    case PartKind::Sequence:
      return add_sequence_index(r, part, shape, stride, acc);
    default:
      return KeyStatus::Error;
  }
}

// Scalar index of key under layout: an int key is a flat (colexicographic)
// ordinal; a sequence key has one part per top-level mode.
template <class Reader, class Part>
KeyStatus key_index(Reader& r, Part key, const Layout& layout, int64_t* out) {
  int64_t acc = 0;
  KeyStatus st;
  switch (r.kind(key)) {
    case PartKind::Int: {
      int64_t ord;
      st = r.ordinal(key, layout.size(), &ord);
      if (st == KeyStatus::Ok) acc = layout.index_of_ordinal(ord);
      break;
    }
    case PartKind::Sequence:
      st = add_sequence_index(r, key, layout.shape(), layout.stride(), &acc);
      break;
    default:
      return KeyStatus::Error;
  }
  if (st == KeyStatus::Ok) *out = acc;
  return st;
}

}  // namespace sw

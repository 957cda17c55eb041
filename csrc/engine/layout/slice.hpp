// Slicing a layout (basic indexing of a tensor): a key with one part per
// top-level mode gives the offset and the layout of the view it selects.
// Pure layout algebra: no element is touched, so a view shares its carrier.
//
// Parts (NumPy's basic indexing, over first-mode-fastest modes):
//  - Index i: the ordinal within the mode (negative counts from the end);
//    the mode is dropped and the offset moves to that coordinate.
//  - Range start:stop:step (Python slice semantics, step > 0): on a leaf mode
//    the extent becomes the count and the stride is multiplied by step. On a
//    hierarchical mode the whole range (0:size:1) keeps the mode as it is;
//    any other range is kept when the layout can express it (its ordinals
//    walk the mode's leaves without a partial carry: a run inside one leaf,
//    or whole rows of the faster leaves), as a leaf or a node of leaves;
//    else, when the offsets it selects are evenly spaced (any one or two
//    are), as one leaf of that spacing; Decreasing when they are evenly
//    spaced but fall (a stride is never negative); otherwise Inexpressible.
//  - Ellipsis: as many whole ranges as the modes that no other part
//    addresses (at most one).
//  - NewAxis: a new extent-1 mode (stride 0) at this position.
//  - Nested: one sub-part per child of a hierarchical mode (Index, Range,
//    Nested); the mode keeps its nesting, minus the children an Index drops,
//    or is dropped when every child is.
// Missing trailing parts are whole ranges (NumPy's rule).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "layout/layout.hpp"

namespace sw {

struct SlicePart {
  enum class Kind : uint8_t { Index, Range, Ellipsis, NewAxis, Nested };
  Kind kind = Kind::Range;
  int64_t index = 0;                                    // Index
  int64_t start = INT64_MIN, stop = INT64_MAX, step = 1;  // Range: INT64_MIN/MAX are open ends
  std::vector<SlicePart> nested;                        // Nested

  static SlicePart at(int64_t i) { SlicePart p; p.kind = Kind::Index; p.index = i; return p; }
  static SlicePart range(int64_t start, int64_t stop, int64_t step = 1) {
    SlicePart p; p.start = start; p.stop = stop; p.step = step; return p;
  }
  static SlicePart all() { return SlicePart{}; }
  static SlicePart ellipsis() { SlicePart p; p.kind = Kind::Ellipsis; return p; }
  static SlicePart new_axis() { SlicePart p; p.kind = Kind::NewAxis; return p; }
  static SlicePart of(std::vector<SlicePart> parts) {
    SlicePart p; p.kind = Kind::Nested; p.nested = std::move(parts); return p;
  }
};

enum class SliceStatus : uint8_t {
  Ok,
  TooManyParts,     // more mode-addressing parts than modes (mode = the rank)
  TwoEllipses,      // a second Ellipsis
  IndexOutOfRange,  // value/extent: the index and the mode's size
  StepNotPositive,  // value: the step
  Empty,            // the range selects nothing (a Layout has no zero extent)
  Inexpressible,    // a range on a hierarchical mode whose offsets are not evenly spaced (nor whole runs)
  Decreasing,       // such a range whose offsets are evenly spaced but fall (spacing: the step < 0)
  NestedOnLeaf,     // a Nested part on a leaf mode
  NestedArity,      // value/extent: the sub-part count and the child count
  NotAllowedNested, // Ellipsis or NewAxis inside a Nested part
  NotFlat,          // slice_flat only: not its case, use slice_layout
};

struct SliceError {
  SliceStatus status = SliceStatus::Ok;
  std::vector<size_t> mode;  // path of the failing mode (top-level first)
  int64_t value = 0;
  int64_t extent = 0;
  int64_t spacing = 0;  // Decreasing: the (negative) offset step
};

struct SliceResult {
  int64_t offset = 0;  // added to the tensor's offset
  Layout layout;
};

// The view key selects of layout. Ok and *out, or the failure in *err.
SliceStatus slice_layout(const Layout& layout, std::span<const SlicePart> key, SliceResult* out, SliceError* err);

// The common case of slice_layout without building a Layout (no
// allocation): every top-level mode of layout is a leaf, no part is nested
// and the view has at most kCap modes. Its modes (all leaves) and offset,
// an error status (err filled), or NotFlat (call slice_layout).
struct FlatSlice {
  static constexpr size_t kCap = 16;
  LeafMode leaves[kCap];
  size_t n = 0;
  int64_t offset = 0;
};
SliceStatus slice_flat(const Layout& layout, std::span<const SlicePart> key, FlatSlice* out, SliceError* err);

// Python's PySlice_AdjustIndices for a positive step: clamps start and stop
// (INT64_MIN/MAX as open ends, negatives from the end) to [0, size] and
// returns the number of elements selected.
int64_t adjust_range(int64_t size, int64_t* start, int64_t* stop, int64_t step);

// The leaves a range start, start + step, ... (count > 1 elements, step > 0)
// of the mode with leaves (depth-first, first fastest) walks, or false
// when no layout expresses it. The offset of the first element is the
// caller's (the mode's index of ordinal start).
bool range_leaves(const std::vector<LeafMode>& mode, int64_t start, int64_t step, int64_t count,
                  std::vector<LeafMode>* out);

// Whether the offsets of the ordinals start, start + step, ... (count of
// them, step > 0) of the mode with leaves form an arithmetic progression,
// and its step in *spacing (negative when they fall; 0 for count < 2).
// Exact, in time linear in the leaves for every range but a few short ones
// (a step of more than a row with carries that vary), which it compares
// spacing by spacing.
bool range_spacing(const std::vector<LeafMode>& mode, int64_t start, int64_t step, int64_t count, int64_t* spacing);

}  // namespace sw

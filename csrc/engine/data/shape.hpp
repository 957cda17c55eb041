// The shape side of strideweave.tensor(data) (API.md section 11), without
// Python: the text of shapes and element positions in messages, the
// rectangular-shape rules of a nested sequence, the dtype a nested
// sequence's leaves infer, and where each element goes (the placement: a
// row-major layout or a given injective one). The binding walks the Python
// objects and reports each level and leaf to a NestedShape; it converts the
// leaves and stores them at the slots RowMajorSlots yields.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/convert.hpp"
#include "dtype/dtype.hpp"
#include "layout/layout.hpp"

namespace sw::data {

// Rank limit of tensor() data (nested levels or buffer dimensions).
inline constexpr int kMaxRank = 64;

// Python-tuple text of a shape or index: "(2, 3)", "(5,)", "()".
std::string shape_text(std::span<const int64_t> shape);
// The row-major index tuple (as text) of a flat ordinal within shape:
// position_text({2, 3}, 4) == "(1, 1)".
std::string position_text(std::span<const int64_t> shape, int64_t ordinal);

// True when every extent is >= 0 (an extent 0 makes an empty tensor).
bool extents_non_negative(std::span<const int64_t> shape) noexcept;
// Product of the extents (the element count; extents already validated).
int64_t element_count(std::span<const int64_t> shape) noexcept;

// Shape inference over a nested sequence, one level or leaf at a time in
// depth-first order. The first leaf fixes the leaf depth; every level at a
// depth must have the length the first one there had.
class NestedShape {
 public:
  enum class Step : uint8_t {
    Ok,
    SequenceWhereNumber,  // a level at or below the leaf depth
    NumberWhereSequence,  // a leaf above the leaf depth
    LengthMismatch,       // a level's length differs from its depth's
    TooDeep,              // more than kMaxRank levels
    ZeroExtent,           // an empty level: nothing below it to walk (shape() then ends in 0)
  };

  // A level is about to be read at the current depth (checks that do not
  // need its length).
  Step begin_level() const noexcept;
  // Its length: the first level at a depth records it, later ones must match.
  // An empty level is the deepest one (NumPy's [[], []] has shape (2, 0)):
  // it fixes the leaf depth below it, so a leaf or a longer level elsewhere
  // is ragged.
  Step level_length(int64_t len);
  // The walk descends into item i of the current level / comes back.
  void enter(int64_t i) { path_.push_back(i); }
  void leave() noexcept { path_.pop_back(); }
  // A leaf at the current depth.
  Step leaf();

  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  // "<what> at index (i, j) (shape so far (a, b))" for one of the three
  // ragged steps (SequenceWhereNumber, NumberWhereSequence,
  // LengthMismatch); len is the offending level length for LengthMismatch.
  std::string ragged_text(Step step, int64_t len = 0) const;

 private:
  std::vector<int64_t> shape_;
  std::vector<int64_t> path_;
  int leaf_depth_ = -1;
};

// The kinds of nested-sequence leaves, ordered by widening.
enum class LeafKind : uint8_t { Bool, Int, Float };
// The storage dtype tensor() infers from the widest leaf kind: Float32,
// Int32 or Bool.
DTypeCode inferred_dtype(LeafKind widest) noexcept;
// Names of buffer scalar kinds in messages ("signed integer", ...).
const char* kind_text(ScalarKind kind) noexcept;

// Where tensor() puts the elements of the tensor's layout: the slot stride
// of each data dimension and the storage it needs.
struct Placement {
  std::vector<int64_t> strides;  // one per data dimension
  int64_t cosize = 1;            // slots of the fresh storage
  bool compact = true;           // no holes: the storage need not be zeroed
};

// Row-major: Layout(Shape([d0, ..., dk]), Stride([d1*...*dk, ..., 1])) and
// its placement (extents validated >= 1). Throws what Layout's constructor
// throws.
Layout row_major(std::span<const int64_t> shape, Placement* out);

// A given layout must have leaf extents equal to the data's shape and be
// injective (each element needs its own slot).
enum class LayoutFit : uint8_t { Ok, ExtentsDiffer, NotInjective };
LayoutFit fit_layout(const Layout& layout, std::span<const int64_t> shape, Placement* out);
// The leaf extents of a layout (what ExtentsDiffer compares).
std::vector<int64_t> leaf_extents(const Layout& layout);

// The storage slot of every element in row-major order: an odometer over
// the coordinates, slot = sum(coord * stride). Starts at element 0.
class RowMajorSlots {
 public:
  RowMajorSlots(std::span<const int64_t> shape, std::span<const int64_t> strides)
      : shape_(shape), strides_(strides), coord_(shape.size(), 0) {}
  int64_t slot() const noexcept { return slot_; }
  void next() noexcept;

 private:
  std::span<const int64_t> shape_, strides_;
  std::vector<int64_t> coord_;
  int64_t slot_ = 0;
};

}  // namespace sw::data

// The text of a tensor's values for repr(): which elements are shown
// (NumPy's summarisation: every element up to a threshold, else the edge
// items of each dimension around "..."), the shortest round-trip text of a
// binary32, and the nested-bracket layout of the element texts (NumPy's:
// right-aligned columns, one row per line, wrapped at a line width).
// Dimensions are the tensor's leaf modes, first leaf outermost, as
// Tensor.tolist() nests them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sw::text {

struct Summary {
  int64_t threshold = 1000;  // more elements than this are summarised
  int64_t edge = 3;          // items kept at each end of a summarised dimension
  size_t width = 75;         // line width the rows wrap at
};

// Marks the cut of a summarised dimension in shown_coordinates.
inline constexpr int64_t kCut = -1;

// The coordinates shown along each dimension, in order: all of them when the
// element count is at most s.threshold; otherwise, in every dimension longer
// than 2 * s.edge, the first s.edge, kCut, then the last s.edge. A
// dimension of extent 0 shows no coordinate (it prints as "[]"); a zero-size
// tensor is summarised by the count of brackets before its first empty
// dimension.
std::vector<std::vector<int64_t>> shown_coordinates(const std::vector<int64_t>& extents, const Summary& s);

// The number of element texts nested_text expects: the product over
// dimensions of the shown coordinates that are not kCut.
int64_t shown_count(const std::vector<std::vector<int64_t>>& shown);

// The shortest text that reads back as v ("0.1", "1.0", "-2.5e-08", "inf",
// "nan"), with ".0" added to integral values as Python's float repr does.
std::string float32_text(float v);

// "[[a, b], [c, d]]"-style text of the shown elements: texts are in
// row-major order over the shown coordinates (last dimension fastest, kCut
// skipped), right-aligned to the widest. Rows of the innermost dimension are
// wrapped at s.width; every line after the first starts with indent spaces
// (the column after the caller's opening text) plus the bracket depth;
// blocks of rank >= 3 are separated by blank lines as NumPy does. Rank 0 is
// the one text.
std::string nested_text(const std::vector<std::vector<int64_t>>& shown, const std::vector<std::string>& texts,
                        size_t indent, const Summary& s);

}  // namespace sw::text

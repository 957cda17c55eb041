// The text of a tensor's values (csrc/engine/tensor/value_text.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/value_text.hpp"

using sw::text::kCut;
using sw::text::Summary;

namespace {

std::vector<std::string> numbers(int64_t from, int64_t n) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(std::to_string(from + i));
  return v;
}

}  // namespace

TEST(ValueText, SmallTensorsShowEveryCoordinate) {
  const auto shown = sw::text::shown_coordinates({2, 3}, Summary{});
  EXPECT_EQ(shown, (std::vector<std::vector<int64_t>>{{0, 1}, {0, 1, 2}}));
  EXPECT_EQ(sw::text::shown_count(shown), 6);
}

TEST(ValueText, LargeTensorsKeepTheEdgesOfLongDimensions) {
  Summary s;
  s.threshold = 10;
  s.edge = 2;
  const auto shown = sw::text::shown_coordinates({3, 100}, s);
  EXPECT_EQ(shown[0], (std::vector<int64_t>{0, 1, 2}));  // not longer than 2 * edge
  EXPECT_EQ(shown[1], (std::vector<int64_t>{0, 1, kCut, 98, 99}));
  EXPECT_EQ(sw::text::shown_count(shown), 12);
  // At the threshold nothing is cut.
  EXPECT_EQ(sw::text::shown_coordinates({10}, s)[0].size(), 10u);
}

TEST(ValueText, Float32TextIsShortestRoundTrip) {
  EXPECT_EQ(sw::text::float32_text(0.1f), "0.1");
  EXPECT_EQ(sw::text::float32_text(1.0f), "1.0");
  EXPECT_EQ(sw::text::float32_text(-2.5f), "-2.5");
  EXPECT_EQ(sw::text::float32_text(1e20f), "1e+20");
  EXPECT_EQ(sw::text::float32_text(std::numeric_limits<float>::infinity()), "inf");
  EXPECT_EQ(sw::text::float32_text(-std::numeric_limits<float>::infinity()), "-inf");
  EXPECT_EQ(sw::text::float32_text(std::nanf("")), "nan");
  EXPECT_EQ(std::stof(sw::text::float32_text(16777216.0f)), 16777216.0f);
}

TEST(ValueText, NestedRowsAreRightAligned) {
  Summary s;
  const auto shown = sw::text::shown_coordinates({2, 3}, s);
  const std::string t = sw::text::nested_text(shown, {"0", "1", "2", "30", "4", "5"}, 7, s);
  EXPECT_EQ(t, "[[ 0,  1,  2],\n        [30,  4,  5]]");
}

TEST(ValueText, RankZeroAndRankOne) {
  Summary s;
  EXPECT_EQ(sw::text::nested_text({}, {"2.5"}, 7, s), "2.5");
  EXPECT_EQ(sw::text::nested_text({{0, 1}}, {"1.0", "2.0"}, 7, s), "[1.0, 2.0]");
}

TEST(ValueText, SummarisedRowsAndBlocks) {
  Summary s;
  s.threshold = 10;
  s.edge = 1;
  const auto shown = sw::text::shown_coordinates({3, 5}, s);
  const std::string t = sw::text::nested_text(shown, {"0", "4", "10", "14"}, 0, s);
  EXPECT_EQ(t, "[[ 0, ...,  4],\n ...,\n [10, ..., 14]]");
}

TEST(ValueText, BlocksOfRankThreeAreSeparatedByABlankLine) {
  Summary s;
  const auto shown = sw::text::shown_coordinates({2, 1, 2}, s);
  EXPECT_EQ(sw::text::nested_text(shown, numbers(0, 4), 1, s), "[[[0, 1]],\n\n  [[2, 3]]]");
}

TEST(ValueText, LongRowsWrapAtTheLineWidth) {
  Summary s;
  s.width = 20;
  const auto shown = sw::text::shown_coordinates({8}, s);
  const std::string t = sw::text::nested_text(shown, numbers(10, 8), 7, s);
  // Every line fits the width; the continuation starts under the first item.
  size_t start = 0;
  while (start < t.size()) {
    size_t end = t.find('\n', start);
    if (end == std::string::npos) end = t.size();
    EXPECT_LE(end - start + (start == 0 ? 7 : 0), 20u) << t;
    start = end + 1;
  }
  EXPECT_EQ(t.substr(0, 9), "[10, 11, ");
  EXPECT_NE(t.find("\n        1"), std::string::npos) << t;
}

TEST(ValueText, TextCountMustMatch) {
  Summary s;
  EXPECT_THROW(sw::text::nested_text({{0, 1}}, {"1"}, 0, s), std::invalid_argument);
}

TEST(ValueText, ZeroSizeTensorsPrintEmptyBracketsAtTheirNesting) {
  Summary s;
  const auto zero = sw::text::shown_coordinates({0}, s);
  EXPECT_EQ(sw::text::shown_count(zero), 0);
  EXPECT_EQ(sw::text::nested_text(zero, {}, 7, s), "[]");
  EXPECT_EQ(sw::text::nested_text(sw::text::shown_coordinates({0, 3}, s), {}, 7, s), "[]");
  EXPECT_EQ(sw::text::nested_text(sw::text::shown_coordinates({3, 0}, s), {}, 0, s), "[[],\n [],\n []]");
  EXPECT_EQ(sw::text::nested_text(sw::text::shown_coordinates({2, 0, 4}, s), {}, 0, s), "[[],\n\n []]");
}

TEST(ValueText, ZeroSizeTensorsWithManyRowsAreSummarised) {
  Summary s;
  s.threshold = 10;
  s.edge = 1;
  // 50 rows of nothing: the rows count against the threshold, not the elements.
  const auto shown = sw::text::shown_coordinates({50, 0}, s);
  EXPECT_EQ(shown[0], (std::vector<int64_t>{0, kCut, 49}));
  EXPECT_EQ(sw::text::nested_text(shown, {}, 0, s), "[[],\n ...,\n []]");
  // Few rows: every one shown.
  EXPECT_EQ(sw::text::shown_coordinates({4, 0}, s)[0].size(), 4u);
}

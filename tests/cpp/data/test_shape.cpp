// The shape side of strideweave.tensor(data) (csrc/engine/data/shape.hpp).
#include <gtest/gtest.h>

#include <vector>

#include "data/shape.hpp"

namespace d = sw::data;
using Step = d::NestedShape::Step;

namespace {
sw::Layout make(std::vector<int64_t> shape, std::vector<int64_t> stride) {
  std::vector<sw::IntTree> s, t;
  for (int64_t e : shape) s.push_back(sw::IntTree::leaf(e));
  for (int64_t e : stride) t.push_back(sw::IntTree::leaf(e));
  return sw::Layout(sw::IntTree::node(s), sw::IntTree::node(t));
}
}  // namespace

TEST(DataShape, Text) {
  EXPECT_EQ(d::shape_text(std::vector<int64_t>{}), "()");
  EXPECT_EQ(d::shape_text(std::vector<int64_t>{5}), "(5,)");
  EXPECT_EQ(d::shape_text(std::vector<int64_t>{2, 3}), "(2, 3)");
  const std::vector<int64_t> shape{2, 3, 4};
  EXPECT_EQ(d::position_text(shape, 0), "(0, 0, 0)");
  EXPECT_EQ(d::position_text(shape, 5), "(0, 1, 1)");
  EXPECT_EQ(d::position_text(shape, 23), "(1, 2, 3)");
  EXPECT_EQ(d::position_text(std::vector<int64_t>{}, 0), "()");
}

TEST(DataShape, ExtentsAndCount) {
  EXPECT_TRUE(d::extents_non_negative(std::vector<int64_t>{}));
  EXPECT_TRUE(d::extents_non_negative(std::vector<int64_t>{1, 7}));
  EXPECT_TRUE(d::extents_non_negative(std::vector<int64_t>{3, 0}));
  EXPECT_FALSE(d::extents_non_negative(std::vector<int64_t>{3, -1}));
  EXPECT_EQ(d::element_count(std::vector<int64_t>{3, 0}), 0);
  EXPECT_EQ(d::element_count(std::vector<int64_t>{}), 1);
  EXPECT_EQ(d::element_count(std::vector<int64_t>{2, 3, 4}), 24);
}

// Feeds [[1, 2, 3], [4, 5, 6]] depth first.
TEST(NestedShape, RectangularTwoLevels) {
  d::NestedShape n;
  ASSERT_EQ(n.begin_level(), Step::Ok);
  ASSERT_EQ(n.level_length(2), Step::Ok);
  for (int64_t i = 0; i < 2; ++i) {
    n.enter(i);
    ASSERT_EQ(n.begin_level(), Step::Ok);
    ASSERT_EQ(n.level_length(3), Step::Ok);
    for (int64_t j = 0; j < 3; ++j) {
      n.enter(j);
      ASSERT_EQ(n.leaf(), Step::Ok);
      n.leave();
    }
    n.leave();
  }
  EXPECT_EQ(n.shape(), (std::vector<int64_t>{2, 3}));
}

TEST(NestedShape, LengthMismatchNamesPositionAndShape) {
  d::NestedShape n;
  n.level_length(2);
  n.enter(0);
  n.level_length(3);
  n.leave();
  n.enter(1);
  ASSERT_EQ(n.begin_level(), Step::Ok);
  const Step s = n.level_length(2);
  ASSERT_EQ(s, Step::LengthMismatch);
  EXPECT_EQ(n.ragged_text(s, 2), "length 2 instead of 3 at index (1,) (shape so far (2, 3))");
}

TEST(NestedShape, LeafDepthIsFixedByTheFirstLeaf) {
  // [[1, 2], 3]: the number 3 sits where a sequence was expected.
  d::NestedShape n;
  n.level_length(2);
  n.enter(0);
  n.level_length(2);
  n.enter(0);
  EXPECT_EQ(n.leaf(), Step::Ok);
  n.leave();
  n.leave();
  n.enter(1);
  const Step s = n.leaf();
  EXPECT_EQ(s, Step::NumberWhereSequence);
  EXPECT_EQ(n.ragged_text(s), "a number where a sequence was expected at index (1,) (shape so far (2, 2))");

  // [1, [2]]: a sequence where a number was expected.
  d::NestedShape m;
  m.level_length(2);
  m.enter(0);
  EXPECT_EQ(m.leaf(), Step::Ok);
  m.leave();
  m.enter(1);
  const Step t = m.begin_level();
  EXPECT_EQ(t, Step::SequenceWhereNumber);
  EXPECT_EQ(m.ragged_text(t), "a sequence where a number was expected at index (1,) (shape so far (2,))");
}

TEST(NestedShape, ZeroExtentAndDepthLimit) {
  d::NestedShape n;
  n.level_length(1);
  n.enter(0);
  EXPECT_EQ(n.level_length(0), Step::ZeroExtent);
  EXPECT_EQ(n.shape(), (std::vector<int64_t>{1, 0}));

  d::NestedShape deep;
  for (int k = 0; k < d::kMaxRank; ++k) {
    ASSERT_EQ(deep.begin_level(), Step::Ok);
    deep.level_length(1);
    deep.enter(0);
  }
  EXPECT_EQ(deep.begin_level(), Step::TooDeep);
}

// [[], []] is (2, 0), as NumPy's; an empty level is the deepest, so a
// sibling with an element ([[], [1]]) or a deeper level is ragged.
TEST(NestedShape, EmptyLevelsAreTheDeepest) {
  d::NestedShape n;
  ASSERT_EQ(n.level_length(2), Step::Ok);
  for (int64_t i = 0; i < 2; ++i) {
    n.enter(i);
    ASSERT_EQ(n.begin_level(), Step::Ok);
    EXPECT_EQ(n.level_length(0), Step::ZeroExtent);
    n.leave();
  }
  EXPECT_EQ(n.shape(), (std::vector<int64_t>{2, 0}));

  d::NestedShape longer;  // [[], [1]]
  longer.level_length(2);
  longer.enter(0);
  longer.level_length(0);
  longer.leave();
  longer.enter(1);
  EXPECT_EQ(longer.level_length(1), Step::LengthMismatch);

  d::NestedShape leaf_above;  // [[], 5]
  leaf_above.level_length(2);
  leaf_above.enter(0);
  leaf_above.level_length(0);
  leaf_above.leave();
  leaf_above.enter(1);
  EXPECT_EQ(leaf_above.leaf(), Step::NumberWhereSequence);

  d::NestedShape deeper;  // [[5], [[]]]: the second [] sits below the leaf depth
  deeper.level_length(2);
  deeper.enter(0);
  deeper.level_length(1);
  deeper.enter(0);
  ASSERT_EQ(deeper.leaf(), Step::Ok);
  deeper.leave();
  deeper.leave();
  deeper.enter(1);
  deeper.level_length(1);
  deeper.enter(0);
  EXPECT_EQ(deeper.begin_level(), Step::SequenceWhereNumber);
}

TEST(DataShape, InferredDtypeAndKindText) {
  EXPECT_EQ(d::inferred_dtype(d::LeafKind::Bool), sw::DTypeCode::Bool);
  EXPECT_EQ(d::inferred_dtype(d::LeafKind::Int), sw::DTypeCode::Int32);
  EXPECT_EQ(d::inferred_dtype(d::LeafKind::Float), sw::DTypeCode::Float32);
  EXPECT_STREQ(d::kind_text(sw::ScalarKind::Unsigned), "unsigned integer");
  EXPECT_STREQ(d::kind_text(sw::ScalarKind::Float), "floating");
}

TEST(Placement, RowMajor) {
  d::Placement p;
  const std::vector<int64_t> shape{2, 3, 4};
  sw::Layout l = d::row_major(shape, &p);
  EXPECT_EQ(p.strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(p.cosize, 24);
  EXPECT_TRUE(p.compact);
  EXPECT_EQ(l, make({2, 3, 4}, {12, 4, 1}));

  d::Placement scalar;
  sw::Layout r0 = d::row_major(std::vector<int64_t>{}, &scalar);
  EXPECT_TRUE(scalar.strides.empty());
  EXPECT_EQ(scalar.cosize, 1);
  EXPECT_EQ(r0.size(), 1);
}

TEST(Placement, GivenLayout) {
  const std::vector<int64_t> shape{2, 3};
  d::Placement p;
  // Column-major with a hole: injective, not compact.
  EXPECT_EQ(d::fit_layout(make({2, 3}, {1, 3}), shape, &p), d::LayoutFit::Ok);
  EXPECT_EQ(p.strides, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(p.cosize, 8);
  EXPECT_FALSE(p.compact);
  EXPECT_EQ(d::fit_layout(make({2, 3}, {3, 1}), shape, &p), d::LayoutFit::Ok);
  EXPECT_TRUE(p.compact);

  EXPECT_EQ(d::fit_layout(make({3, 2}, {1, 3}), shape, &p), d::LayoutFit::ExtentsDiffer);
  EXPECT_EQ(d::fit_layout(make({6}, {1}), shape, &p), d::LayoutFit::ExtentsDiffer);
  EXPECT_EQ(d::fit_layout(make({2, 3}, {0, 1}), shape, &p), d::LayoutFit::NotInjective);
  EXPECT_EQ(d::leaf_extents(make({3, 2}, {1, 3})), (std::vector<int64_t>{3, 2}));
}

TEST(RowMajorSlots, WalksCoordinatesRowMajor) {
  const std::vector<int64_t> shape{2, 3}, strides{1, 2};  // column-major slots
  d::RowMajorSlots slots(shape, strides);
  std::vector<int64_t> seen;
  for (int k = 0; k < 6; ++k, slots.next()) seen.push_back(slots.slot());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));

  d::RowMajorSlots scalar(std::vector<int64_t>{}, std::vector<int64_t>{});
  EXPECT_EQ(scalar.slot(), 0);
}

// Tensor and TensorRepresentation validity rules
// (csrc/engine/tensor/subtensor_rules.hpp).
#include <gtest/gtest.h>

#include <climits>

#include "tensor/subtensor_rules.hpp"

using sw::IntTree;
using sw::Layout;
using sw::OffsetCheck;
using Form = sw::RepresentationForm;

TEST(SubtensorRules, SpanFits) {
  EXPECT_TRUE(sw::span_fits(0, 6, 6));
  EXPECT_TRUE(sw::span_fits(2, 6, 4));
  EXPECT_FALSE(sw::span_fits(3, 6, 4));
  EXPECT_FALSE(sw::span_fits(0, 3, 4));
  // No overflow for offsets near INT64_MAX.
  EXPECT_FALSE(sw::span_fits(INT64_MAX, 10, 2));
  EXPECT_TRUE(sw::span_fits(INT64_MAX - 1, INT64_MAX, 1));
}

TEST(SubtensorRules, Offsets) {
  EXPECT_EQ(sw::check_offset(0, 0, 100), OffsetCheck::Ok);
  EXPECT_EQ(sw::check_offset(100, 0, 100), OffsetCheck::Ok);
  EXPECT_EQ(sw::check_offset(101, 0, 100), OffsetCheck::TooLarge);
  EXPECT_EQ(sw::check_offset(-1, 0, 100), OffsetCheck::Negative);
  // An overflowing value reads -1: the overflow direction decides.
  EXPECT_EQ(sw::check_offset(-1, 1, 100), OffsetCheck::TooLarge);
  EXPECT_EQ(sw::check_offset(-1, -1, 100), OffsetCheck::Negative);
}

TEST(SubtensorRules, RepresentationCounts) {
  EXPECT_EQ(sw::classify_representation(false, 0, 0, 0), Form::NoSubtensors);
  EXPECT_EQ(sw::classify_representation(true, 2, 0, 0), Form::NoSubtensors);
  EXPECT_EQ(sw::classify_representation(false, 0, 1, 0), Form::Single);
  EXPECT_EQ(sw::classify_representation(false, 0, 2, 1), Form::NeedsCompound);
  EXPECT_EQ(sw::classify_representation(false, 0, 1, 1), Form::NeedsCompound);
  EXPECT_EQ(sw::classify_representation(true, 2, 2, 1), Form::Multi);
  EXPECT_EQ(sw::classify_representation(true, 1, 1, 0), Form::Multi);  // a one-plane compound
  EXPECT_EQ(sw::classify_representation(true, 3, 2, 1), Form::PlaneCount);
  EXPECT_EQ(sw::classify_representation(true, 2, 2, 0), Form::AdjacentCount);
  EXPECT_EQ(sw::classify_representation(true, 2, 2, 2), Form::AdjacentCount);
}

TEST(SubtensorRules, AdjacentDomain) {
  const Layout sub(IntTree::node({IntTree::leaf(2), IntTree::leaf(3)}),
                   IntTree::node({IntTree::leaf(3), IntTree::leaf(1)}));
  const Layout same_shape(IntTree::node({IntTree::leaf(2), IntTree::leaf(3)}),
                          IntTree::node({IntTree::leaf(0), IntTree::leaf(0)}));
  const Layout flat(IntTree::node({IntTree::leaf(6)}), IntTree::node({IntTree::leaf(1)}));
  EXPECT_TRUE(sw::adjacent_fits(same_shape, sub));
  EXPECT_FALSE(sw::adjacent_fits(flat, sub));  // same size, another shape
}

// Shape/Stride/Layout object rules (csrc/engine/layout/tree_rules.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "layout/tree_rules.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::Layout;
using sw::TreeKind;

TEST(TreeRules, LeafRules) {
  EXPECT_STREQ(sw::tree_kind_name(TreeKind::Shape), "Shape");
  EXPECT_STREQ(sw::tree_kind_name(TreeKind::Stride), "Stride");
  EXPECT_TRUE(sw::leaf_valid(TreeKind::Shape, 1));
  EXPECT_FALSE(sw::leaf_valid(TreeKind::Shape, 0));
  EXPECT_TRUE(sw::leaf_valid(TreeKind::Stride, 0));
  EXPECT_FALSE(sw::leaf_valid(TreeKind::Stride, -1));
  EXPECT_EQ(sw::leaf_error(TreeKind::Shape, 0), "Shape extent must be >= 1, got 0");
  EXPECT_EQ(sw::leaf_error(TreeKind::Stride, -3), "Stride must be >= 0, got -3");
}

TEST(TreeRules, FirstInvalidLeafIsDepthFirst) {
  const IntTree t = N({L(1), N({L(0), L(5)}), L(0)});
  const IntTree* bad = sw::first_invalid_leaf(TreeKind::Shape, t);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad, &t.children[1].children[0]);
  EXPECT_EQ(sw::first_invalid_leaf(TreeKind::Stride, t), nullptr);
  EXPECT_EQ(sw::first_invalid_leaf(TreeKind::Shape, N({})), nullptr);
}

TEST(TreeRules, DepthAndSizeLimits) {
  IntTree deep = L(2);
  for (int k = 0; k < sw::kMaxTreeDepth - 1; ++k) deep = N({deep});
  ASSERT_EQ(deep.depth(), sw::kMaxTreeDepth - 1);
  EXPECT_FALSE(sw::nesting_too_deep(1, deep));
  EXPECT_TRUE(sw::nesting_too_deep(2, deep));
  const int64_t big = int64_t{1} << 40;
  EXPECT_FALSE(sw::size_overflows(N({L(big), L(1 << 20)})));
  EXPECT_TRUE(sw::size_overflows(N({L(big), N({L(big)})})));
}

TEST(TreeRules, SelectModes) {
  const IntTree t = N({L(2), N({L(3), L(4)}), L(5), L(6)});
  EXPECT_EQ(sw::select_modes(t, 1, 2, 2), N({N({L(3), L(4)}), L(6)}));
  EXPECT_EQ(sw::select_modes(t, 3, -1, 4), N({L(6), L(5), N({L(3), L(4)}), L(2)}));
  EXPECT_EQ(sw::select_modes(t, 0, 1, 0), N({}));
  const Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  EXPECT_EQ(sw::select_modes(l, 1, 1, 1), Layout(N({N({L(3), L(4)})}), N({N({L(2), L(6)})})));
}

TEST(TreeRules, ModeLayout) {
  const Layout l(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  EXPECT_EQ(sw::mode_layout(l, 0), Layout(N({L(2)}), N({L(1)})));
  EXPECT_EQ(sw::mode_layout(l, 1), Layout(N({L(3), L(4)}), N({L(2), L(6)})));
}

TEST(TreeRules, DecodeIsFirstModeFastest) {
  const IntTree s = N({L(2), N({L(3), L(4)})});
  EXPECT_EQ(sw::decode_ordinal(s, 0), N({L(0), N({L(0), L(0)})}));
  EXPECT_EQ(sw::decode_ordinal(s, 1), N({L(1), N({L(0), L(0)})}));
  EXPECT_EQ(sw::decode_ordinal(s, 2), N({L(0), N({L(1), L(0)})}));
  EXPECT_EQ(sw::decode_ordinal(s, 23), N({L(1), N({L(2), L(3)})}));
  EXPECT_EQ(sw::decode_ordinal(N({}), 0), N({}));
  // decode inverts the canonical layout's index (encode).
  const Layout c = Layout::canonical(s);
  for (int64_t o = 0; o < 24; ++o) {
    const IntTree coord = sw::decode_ordinal(s, o);
    const int64_t i = coord.children[0].value + 2 * (coord.children[1].children[0].value +
                                                     3 * coord.children[1].children[1].value);
    EXPECT_EQ(c.index_of_ordinal(o), i);
    EXPECT_EQ(i, o);
  }
  EXPECT_TRUE(sw::ordinal_in(s, 23));
  EXPECT_FALSE(sw::ordinal_in(s, 24));
  EXPECT_FALSE(sw::ordinal_in(s, -1));
}

TEST(TreeRules, Repr) {
  EXPECT_EQ(sw::tree_repr("Shape", N({L(2), N({L(3), L(4)})})), "Shape<(2, (3, 4))>");
  EXPECT_EQ(sw::tree_repr("Stride", N({L(1)})), "Stride<(1,)>");
  EXPECT_EQ(sw::tree_repr("Shape", N({})), "Shape<()>");
}

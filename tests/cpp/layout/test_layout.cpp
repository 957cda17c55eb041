// Engine layout math: trees, size/cosize, ordinals, injectivity, canonical,
// broadcast, congruence errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>

#include "layout/layout.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::Layout;
using sw::LeafMode;

namespace {

// Brute force over every coordinate.
bool brute_injective(const Layout& l) {
  std::set<int64_t> seen;
  bool ok = true;
  sw::for_each_index(l.leaves(), [&](int64_t, int64_t i) { ok = ok && seen.insert(i).second; });
  return ok;
}

}  // namespace

TEST(IntTree, DepthAndLeaves) {
  EXPECT_EQ(N({L(2), L(3)}).depth(), 1);
  EXPECT_EQ(N({L(2), N({L(3), L(4)})}).depth(), 2);
  EXPECT_EQ(N({N({L(2), N({L(3)})}), L(4)}).depth(), 3);
  EXPECT_EQ(N({}).depth(), 1);
  EXPECT_EQ(L(7).depth(), 0);
  EXPECT_EQ(N({L(2), N({L(3), L(4)})}).leaves(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(N({}).product(), 1);
  EXPECT_EQ(N({L(2), N({L(3), L(4)})}).product(), 24);
  EXPECT_THROW(N({L(int64_t{1} << 32), L(int64_t{1} << 32)}).product(), std::overflow_error);
}

TEST(IntTree, ToStringAndCongruence) {
  EXPECT_EQ(sw::to_string(N({L(2), N({L(3), L(4)})})), "(2, (3, 4))");
  EXPECT_EQ(sw::to_string(N({L(5)})), "(5,)");
  EXPECT_EQ(sw::to_string(N({})), "()");
  EXPECT_TRUE(sw::congruent(N({L(2), N({L(3)})}), N({L(1), N({L(2)})})));
  EXPECT_FALSE(sw::congruent(N({L(2), N({L(3)})}), N({L(1), L(2)})));
  EXPECT_FALSE(sw::congruent(N({L(2)}), N({L(1), L(2)})));
  EXPECT_EQ(sw::congruence_mismatch(N({L(2)}), N({L(2)})), "");
  EXPECT_NE(sw::congruence_mismatch(N({L(2), N({L(3)})}), N({L(1), L(2)})).find("mode 1"), std::string::npos);
}

TEST(Layout, SizeCosizeLeaves) {
  Layout a(N({L(2), L(3)}), N({L(1), L(4)}));
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.cosize(), 10);
  EXPECT_TRUE(a.is_injective());
  EXPECT_FALSE(a.has_stride_zero());
  Layout b(N({L(2), L(3)}), N({L(1), L(0)}));
  EXPECT_EQ(b.cosize(), 2);
  EXPECT_FALSE(b.is_injective());
  EXPECT_TRUE(b.has_stride_zero());
  Layout c(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  EXPECT_EQ(c.leaves(), (std::vector<LeafMode>{{2, 1}, {3, 2}, {4, 6}}));
  EXPECT_EQ(c.size(), 24);
  EXPECT_EQ(c.cosize(), 24);
  Layout r0;
  EXPECT_EQ(r0.size(), 1);
  EXPECT_EQ(r0.cosize(), 1);
  EXPECT_TRUE(r0.is_injective());
  Layout r0b(N({}), N({}));
  EXPECT_EQ(r0b.size(), 1);
  EXPECT_EQ(r0b.index_of_ordinal(0), 0);
  // Extent-1 stride-0 leaf is not a broadcast.
  Layout d(N({L(1), L(3)}), N({L(0), L(1)}));
  EXPECT_FALSE(d.has_stride_zero());
  EXPECT_TRUE(d.is_injective());
}

TEST(Layout, IndexOfOrdinal) {
  Layout c(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));
  EXPECT_EQ(c.index_of_ordinal(23), 23);
  EXPECT_EQ(c.index_of_ordinal(0), 0);
  EXPECT_EQ(c.index_of_ordinal(1), 1);
  EXPECT_EQ(c.index_of_ordinal(2), 2);
  Layout g(N({L(2), L(3)}), N({L(3), L(1)}));  // row-major 2x3
  EXPECT_EQ(g.index_of_ordinal(1), 3);
  EXPECT_EQ(g.index_of_ordinal(2), 1);
  EXPECT_EQ(g.index_of_ordinal(5), 5);
  // Tree version agrees per mode.
  EXPECT_EQ(sw::tree_index_of_ordinal(c.shape().children[1], c.stride().children[1], 11), 2 * 2 + 3 * 6);
  EXPECT_EQ(sw::tree_index_of_ordinal(c.shape(), c.stride(), 23), 23);
  for (int64_t o = 0; o < c.size(); ++o)
    EXPECT_EQ(sw::tree_index_of_ordinal(c.shape(), c.stride(), o), c.index_of_ordinal(o));
}

TEST(Layout, ForEachIndexOrder) {
  Layout g(N({L(2), N({L(3), L(2)})}), N({L(10), N({L(1), L(100)})}));
  std::vector<int64_t> seen;
  int64_t expect_ord = 0;
  sw::for_each_index(g.leaves(), [&](int64_t ord, int64_t idx) {
    EXPECT_EQ(ord, expect_ord++);
    EXPECT_EQ(idx, g.index_of_ordinal(ord));
    seen.push_back(idx);
  });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 10, 1, 11, 2, 12, 100, 110, 101, 111, 102, 112}));
}

TEST(Layout, ConstructorErrors) {
  try {
    Layout(N({L(2), N({L(3)})}), N({L(1), L(2)}));
    FAIL() << "expected throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not congruent"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("mode 1"), std::string::npos);
  }
  EXPECT_THROW(Layout(N({L(2)}), N({L(1), L(2)})), std::invalid_argument);
  EXPECT_THROW(Layout(N({L(-1)}), N({L(1)})), std::invalid_argument);
  EXPECT_THROW(Layout(N({L(2)}), N({L(-1)})), std::invalid_argument);
  EXPECT_THROW(Layout(L(2), L(1)), std::invalid_argument);
  const int64_t big = int64_t{1} << 32;
  EXPECT_THROW(Layout(N({L(big), L(big)}), N({L(1), L(big)})), std::invalid_argument);  // size
  EXPECT_THROW(Layout(N({L(3)}), N({L(INT64_MAX / 2 + 1)})), std::invalid_argument);     // cosize
  EXPECT_THROW(Layout(N({L(2)}), N({L(INT64_MAX)})), std::invalid_argument);             // cosize == 2^63
  Layout ok(N({L(2)}), N({L(INT64_MAX - 1)}));
  EXPECT_EQ(ok.cosize(), INT64_MAX);
}

TEST(Layout, Canonical) {
  Layout a = Layout::canonical(N({L(4), L(2)}));
  EXPECT_EQ(a.stride(), N({L(1), L(4)}));
  Layout b = Layout::canonical(N({L(2), N({L(4), L(3)})}));
  EXPECT_EQ(b.stride(), N({L(1), N({L(2), L(8)})}));
  EXPECT_TRUE(b.is_injective());
  EXPECT_EQ(b.cosize(), b.size());
  Layout r0 = Layout::canonical(N({}));
  EXPECT_EQ(r0.size(), 1);
  EXPECT_THROW(Layout::canonical(L(3)), std::invalid_argument);
  EXPECT_THROW(Layout::canonical(N({L(-1)})), std::invalid_argument);
  const int64_t big = int64_t{1} << 32;
  EXPECT_THROW(Layout::canonical(N({L(big), L(big), L(2)})), std::invalid_argument);
}

// An extent-0 mode (only a zero-size DLPack import makes one: Shape refuses
// 0): no coordinate, no slot, whatever the other modes span; the size
// overflow check does not apply to what multiplies to 0.
TEST(Layout, ExtentZeroIsEmpty) {
  Layout a(N({L(0), L(3)}), N({L(3), L(1)}));
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(a.cosize(), 0);
  EXPECT_TRUE(a.is_injective());
  EXPECT_FALSE(a.has_stride_zero());
  Layout b(N({L(4), N({L(0), L(2)})}), N({L(0), N({L(7), L(100)})}));
  EXPECT_EQ(b.size(), 0);
  EXPECT_EQ(b.cosize(), 0);
  const int64_t big = int64_t{1} << 40;
  Layout c(N({L(big), L(big), L(0)}), N({L(1), L(big), L(1)}));
  EXPECT_EQ(c.size(), 0);
  EXPECT_EQ(Layout::canonical(N({L(3), L(0)})).cosize(), 0);
  int visits = 0;
  sw::for_each_index(a.leaves(), [&](int64_t, int64_t) { ++visits; });
  EXPECT_EQ(visits, 0);
  // Only extent 1 widens, and never to an empty mode.
  EXPECT_THROW(Layout(N({L(1)}), N({L(1)})).broadcast_to(N({L(0)})), std::invalid_argument);
  EXPECT_EQ(a.broadcast_to(N({L(0), L(3)})), a);
}

TEST(Layout, BroadcastTo) {
  Layout a(N({L(1), N({L(3), L(1)})}), N({L(5), N({L(1), L(7)})}));
  Layout b = a.broadcast_to(N({L(4), N({L(3), L(2)})}));
  EXPECT_EQ(b.shape(), N({L(4), N({L(3), L(2)})}));
  EXPECT_EQ(b.stride(), N({L(0), N({L(1), L(0)})}));
  EXPECT_FALSE(b.is_injective());
  EXPECT_EQ(b.cosize(), 3);
  EXPECT_EQ(a.broadcast_to(a.shape()), a);
  EXPECT_THROW(a.broadcast_to(N({L(4), L(3)})), std::invalid_argument);               // profile
  EXPECT_THROW(a.broadcast_to(N({L(4), N({L(5), L(2)})})), std::invalid_argument);    // 3 -> 5
  EXPECT_THROW(a.broadcast_to(N({L(4), N({L(3), L(2), L(1)})})), std::invalid_argument);
  EXPECT_THROW(a.broadcast_to(N({L(0), N({L(3), L(2)})})), std::invalid_argument);    // extent 0
}

TEST(Layout, InjectivityCases) {
  // Gapped but injective.
  EXPECT_TRUE(Layout(N({L(2), L(3)}), N({L(1), L(4)})).is_injective());
  // Overlapping strides but injective (strides 2 and 3, extents 3 and 2).
  EXPECT_TRUE(Layout(N({L(3), L(2)}), N({L(2), L(3)})).is_injective());
  // Same, with a huge third leaf that only capping can handle.
  EXPECT_TRUE(Layout(N({L(3), L(2), L(int64_t{1} << 40)}), N({L(2), L(3), L(6)})).is_injective());
  // Equal strides collide.
  EXPECT_FALSE(Layout(N({L(2), L(2)}), N({L(1), L(1)})).is_injective());
  // Huge collision caught by pigeonhole.
  const int64_t big = int64_t{1} << 30;
  EXPECT_FALSE(Layout(N({L(big), L(big)}), N({L(2), L(3)})).is_injective());
  // Huge injective via capping: (N,2),(2,2N-3).
  EXPECT_TRUE(Layout(N({L(big), L(2)}), N({L(2), L(2 * big - 3)})).is_injective());
  // Huge compact and transposed layouts (radix rule), no enumeration.
  EXPECT_TRUE(Layout(N({L(big), L(big)}), N({L(big), L(1)})).is_injective());
  EXPECT_TRUE(Layout::canonical(N({L(big), N({L(4), L(big)})})).is_injective());
  // Stride zero with extent > 1.
  EXPECT_FALSE(Layout(N({L(big), L(2)}), N({L(1), L(0)})).is_injective());
  // Huge layout with a collision deep inside: (N,1),(2,N-1) collides at N-1.
  EXPECT_FALSE(Layout(N({L(big), L(2)}), N({L(1), L(big - 1)})).is_injective());
}

TEST(Layout, InjectivityMatchesBruteForce) {
  // Two regimes: small strides (mostly radix/pigeonhole) and larger,
  // overlapping strides (capping, gcd and exact enumeration).
  struct Regime { int max_extent, max_stride; };
  std::mt19937_64 rng(12345);
  for (Regime r : {Regime{5, 12}, Regime{9, 60}}) {
    std::uniform_int_distribution<int> nleaves(0, 4), ext(1, r.max_extent), str(0, r.max_stride);
    for (int trial = 0; trial < 4000; ++trial) {
      std::vector<IntTree> s, d;
      const int n = nleaves(rng);
      for (int i = 0; i < n; ++i) {
        s.push_back(L(ext(rng)));
        d.push_back(L(str(rng)));
      }
      Layout l(N(s), N(d));
      ASSERT_EQ(l.is_injective(), brute_injective(l)) << sw::to_string(l.shape()) << " " << sw::to_string(l.stride());
    }
  }
}

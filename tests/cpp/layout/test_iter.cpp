// GoogleTest for the K-operand coordinate walker (csrc/engine/layout/iter.hpp).
// Expected index sequences come from a naive odometer written here.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "layout/iter.hpp"
#include "layout/layout.hpp"

namespace {

using sw::Indices;
using sw::JointModes;
using sw::LeafMode;
using sw::Repeats;
using Leaves = std::vector<LeafMode>;

// Naive reference: every coordinate, first leaf fastest, by div/mod.
std::vector<int64_t> naive(const Leaves& ls) {
  int64_t total = 1;
  for (const auto& m : ls) total *= m.extent;
  std::vector<int64_t> out;
  for (int64_t ord = 0; ord < total; ++ord) {
    int64_t rest = ord, idx = 0;
    for (const auto& m : ls) {
      idx += (rest % m.extent) * m.stride;
      rest /= m.extent;
    }
    out.push_back(idx);
  }
  return out;
}

template <size_t K>
std::vector<Indices<K>> visits(const JointModes<K>& m) {
  std::vector<Indices<K>> out;
  sw::walk(m, [&](const Indices<K>& i) { out.push_back(i); });
  return out;
}

}  // namespace

TEST(LayoutIter, AppendDropsExtentOneAndMergesContiguous) {
  JointModes<1> m;
  m.append(1, {7});
  m.append(4, {1});
  m.append(1, {99});
  m.append(3, {4});  // 4 == 4 * 1: merges into one run of 12
  m.append(2, {20}); // 20 != 12 * 1: a new mode
  EXPECT_FALSE(m.empty);
  ASSERT_EQ(m.extent, (std::vector<int64_t>{12, 2}));
  EXPECT_EQ(m.stride[0][0], 1);
  EXPECT_EQ(m.stride[1][0], 20);
}

TEST(LayoutIter, MergeNeedsEveryOperandContiguous) {
  JointModes<2> m;
  m.append(3, {1, 2});
  m.append(2, {3, 7});  // operand 0 continues (3 == 3*1), operand 1 does not (7 != 6)
  EXPECT_EQ(m.extent.size(), 2u);
  JointModes<2> n;
  n.append(3, {1, 2});
  n.append(2, {3, 6});
  ASSERT_EQ(n.extent, (std::vector<int64_t>{6}));
  EXPECT_EQ(n.stride[0], (Indices<2>{1, 2}));
}

TEST(LayoutIter, ZeroExtentIsEmpty) {
  JointModes<1> m;
  m.append(3, {1});
  m.append(0, {3});
  m.append(5, {1});
  EXPECT_TRUE(m.empty);
  EXPECT_TRUE(visits(m).empty());
}

TEST(LayoutIter, NoModesVisitsOneCoordinate) {
  JointModes<2> m;
  m.append(1, {5, 6});
  auto v = visits(m);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], (Indices<2>{0, 0}));
}

TEST(LayoutIter, WalkMatchesNaiveForGappedTransposedAndBroadcast) {
  const std::vector<Leaves> cases = {
      {{2, 1}, {3, 4}, {2, 13}},         // gapped hierarchy
      {{2, 6}, {3, 2}, {2, 1}},          // reversed order
      {{2, 1}, {3, 0}, {2, 0}},          // broadcast
      {{1, 5}, {4, 1}, {1, 0}, {3, 4}},  // extent-1 leaves, contiguous run
      {},                                 // rank 0
  };
  for (const Leaves& ls : cases) {
    std::vector<int64_t> got;
    sw::walk(sw::joint_modes<1>({&ls}), [&](const Indices<1>& i) { got.push_back(i[0]); });
    EXPECT_EQ(got, naive(ls));
    std::vector<int64_t> ords, idx;
    sw::for_each_index(ls, [&](int64_t o, int64_t i) {
      ords.push_back(o);
      idx.push_back(i);
    });
    EXPECT_EQ(idx, naive(ls));
    for (size_t k = 0; k < ords.size(); ++k) EXPECT_EQ(ords[k], static_cast<int64_t>(k));
  }
}

TEST(LayoutIter, ThreeOperandsStayInLockstep) {
  const Leaves a = {{2, 1}, {3, 2}};
  const Leaves b = {{2, 0}, {3, 1}};
  const Leaves c = {{2, 3}, {3, 1}};
  auto got = visits(sw::joint_modes<3>({&a, &b, &c}));
  auto na = naive(a), nb = naive(b), nc = naive(c);
  ASSERT_EQ(got.size(), 6u);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], (Indices<3>{na[k], nb[k], nc[k]}));
}

TEST(LayoutIter, JointModesRejectMismatchedOperands) {
  const Leaves a = {{2, 1}, {3, 2}};
  const Leaves shorter = {{2, 1}};
  const Leaves other = {{2, 1}, {4, 2}};
  EXPECT_THROW(sw::joint_modes<2>({&a, &shorter}), std::invalid_argument);
  EXPECT_THROW(sw::joint_modes<2>({&a, &other}), std::invalid_argument);
}

TEST(LayoutIter, SkipRepeatsDropsModesZeroForEveryOperand) {
  const Leaves a = {{2, 1}, {5, 0}, {3, 2}};
  const Leaves b = {{2, 0}, {5, 0}, {3, 1}};
  auto visit = visits(sw::joint_modes<2>({&a, &b}, Repeats::Visit));
  auto skip = visits(sw::joint_modes<2>({&a, &b}, Repeats::Skip));
  EXPECT_EQ(visit.size(), 30u);
  ASSERT_EQ(skip.size(), 6u);
  // Skipping keeps every distinct tuple in first-visit order.
  std::vector<Indices<2>> firsts;
  for (const auto& t : visit) {
    bool seen = false;
    for (const auto& f : firsts) seen = seen || f == t;
    if (!seen) firsts.push_back(t);
  }
  EXPECT_EQ(skip, firsts);
  // A mode stride 0 on only one operand is kept.
  const Leaves c = {{4, 0}};
  const Leaves d = {{4, 1}};
  EXPECT_EQ(visits(sw::joint_modes<2>({&c, &d}, Repeats::Skip)).size(), 4u);
}

TEST(LayoutIter, WalkRunsReportsInnerRunsAndStopsEarly) {
  const Leaves a = {{4, 1}, {3, 10}};
  const auto m = sw::joint_modes<1>({&a});
  std::vector<std::pair<int64_t, int64_t>> runs;
  EXPECT_TRUE(sw::walk_runs(m, [&](const Indices<1>& base, int64_t n, const Indices<1>& step) {
    EXPECT_EQ(step[0], 1);
    runs.push_back({base[0], n});
  }));
  EXPECT_EQ(runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {10, 4}, {20, 4}}));
  int calls = 0;
  EXPECT_FALSE(sw::walk(m, [&](const Indices<1>& i) {
    ++calls;
    return i[0] != 11;  // stop at the sixth coordinate
  }));
  EXPECT_EQ(calls, 6);
}

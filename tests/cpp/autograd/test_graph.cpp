// GoogleTest for the reverse-mode graph (csrc/engine/autograd/graph.cpp):
// discovery, consumer counts, Kahn order, slot routing, the commit set,
// cycles, and the rules of recorded operations.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/graph.hpp"

using sw::autograd::BackwardGraph;
using sw::autograd::kNoNode;
using sw::autograd::NodeKey;
using sw::autograd::SavedState;

namespace {

// A toy graph: each key either is a leaf or lists its producer's input
// keys (nullptr for a slot that takes no gradient).
struct Toy {
  int t[8] = {};
  NodeKey k(int i) const { return &t[i]; }
  std::map<NodeKey, std::vector<NodeKey>> producers;

  // Runs discovery the way the binding does.
  void discover(BackwardGraph& g) const {
    for (size_t i; (i = g.next_to_discover()) != kNoNode;) {
      auto it = producers.find(g.key(i));
      if (it == producers.end())
        g.set_leaf(i);
      else
        g.set_producer(i, true, it->second);
    }
  }
};

// Runs a pass, delivering one gradient to every slot that takes one;
// returns the keys in execution order.
std::vector<NodeKey> run(BackwardGraph& g) {
  std::vector<NodeKey> order;
  g.start();
  for (size_t i; (i = g.next_ready()) != kNoNode;) {
    order.push_back(g.key(i));
    g.note_commit(i, false);
    if (g.runs_backward(i))
      for (size_t s = 0; s < g.slots(i); ++s)
        if (g.input_node(i, s) != kNoNode) g.deliver(i, s);
    g.finish(i);
  }
  return order;
}

size_t position(const std::vector<NodeKey>& order, NodeKey k) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] == k) return i;
  return kNoNode;
}

}  // namespace

TEST(AutogradGraph, LeafRootCommitsItsOwnGradient) {
  Toy toy;
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  EXPECT_EQ(g.size(), 1u);
  EXPECT_EQ(g.contributions(0), 1u);
  EXPECT_EQ(run(g), std::vector<NodeKey>{toy.k(0)});
  EXPECT_EQ(g.committed(), std::vector<size_t>{0});
  EXPECT_TRUE(g.produced().empty());
}

TEST(AutogradGraph, DiamondRunsEachNodeAfterAllItsConsumers) {
  // 0 = f(1, 2); 1 = g(3); 2 = h(3, 4): 3 has two consumers.
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1), toy.k(2)};
  toy.producers[toy.k(1)] = {toy.k(3)};
  toy.producers[toy.k(2)] = {toy.k(3), toy.k(4)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  EXPECT_EQ(g.size(), 5u);
  const auto order = run(g);
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[0], toy.k(0));
  EXPECT_LT(position(order, toy.k(1)), position(order, toy.k(3)));
  EXPECT_LT(position(order, toy.k(2)), position(order, toy.k(3)));
  // 3 got one gradient from each consumer; leaves 3 and 4 commit.
  std::map<NodeKey, size_t> contributions;
  for (size_t i = 0; i < g.size(); ++i) contributions[g.key(i)] = g.contributions(i);
  EXPECT_EQ(contributions[toy.k(3)], 2u);
  EXPECT_EQ(contributions[toy.k(4)], 1u);
  std::vector<NodeKey> committed;
  for (size_t i : g.committed()) committed.push_back(g.key(i));
  EXPECT_EQ(committed.size(), 2u);
  EXPECT_NE(position(committed, toy.k(3)), kNoNode);
  EXPECT_NE(position(committed, toy.k(4)), kNoNode);
  EXPECT_EQ(g.produced().size(), 3u);
}

TEST(AutogradGraph, OneInputInTwoSlotsCountsTwice) {
  // 0 = x * x: both slots route to node 1, which waits for both.
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1), toy.k(1)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g.input_node(0, 0), g.input_node(0, 1));
  run(g);
  EXPECT_EQ(g.contributions(1), 2u);
}

TEST(AutogradGraph, SlotsWithoutGradientAreSkipped) {
  Toy toy;
  toy.producers[toy.k(0)] = {nullptr, toy.k(1)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(g.slots(0), 2u);
  EXPECT_EQ(g.input_node(0, 0), kNoNode);
  EXPECT_THROW(g.deliver(0, 0), std::logic_error);
  run(g);
  EXPECT_EQ(g.contributions(1), 1u);
}

TEST(AutogradGraph, NodesWithoutGradientDoNotRunOrCommit) {
  // 0 = f(1); the backward of 0 routes nothing (the binding saw None), so
  // 1 becomes ready but neither runs nor commits.
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1)};
  toy.producers[toy.k(1)] = {toy.k(2)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  g.start();
  std::vector<size_t> ran;
  for (size_t i; (i = g.next_ready()) != kNoNode;) {
    g.note_commit(i, true);
    if (g.runs_backward(i)) ran.push_back(i);
    g.finish(i);
  }
  EXPECT_EQ(ran, std::vector<size_t>{0});
  // The root retains its gradient; nothing else received one.
  EXPECT_EQ(g.committed(), std::vector<size_t>{0});
}

TEST(AutogradGraph, RetainGradCommitsNonLeaves) {
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  g.start();
  EXPECT_EQ(g.next_ready(), 0u);
  EXPECT_FALSE(g.note_commit(0, false));
  EXPECT_FALSE(g.is_leaf(0));
  EXPECT_TRUE(g.note_commit(0, true));
  EXPECT_EQ(g.committed(), std::vector<size_t>{0});
}

TEST(AutogradGraph, OperationWithoutSavedInputsIsNotALeaf) {
  Toy toy;
  BackwardGraph g(toy.k(0));
  ASSERT_EQ(g.next_to_discover(), 0u);
  g.set_producer(0, false, {});
  EXPECT_EQ(g.next_to_discover(), kNoNode);
  g.start();
  ASSERT_EQ(g.next_ready(), 0u);
  EXPECT_FALSE(g.runs_backward(0));
  EXPECT_FALSE(g.note_commit(0, false));
  g.finish(0);
  EXPECT_EQ(g.next_ready(), kNoNode);
  EXPECT_EQ(g.produced(), std::vector<size_t>{0});
  EXPECT_THROW(g.set_producer(0, false, {toy.k(1)}), std::logic_error);
}

TEST(AutogradGraph, EmptySavedInputsStillRunBackward) {
  Toy toy;
  BackwardGraph g(toy.k(0));
  ASSERT_EQ(g.next_to_discover(), 0u);
  g.set_producer(0, true, {});
  g.start();
  ASSERT_EQ(g.next_ready(), 0u);
  EXPECT_TRUE(g.runs_backward(0));
}

TEST(AutogradGraph, CycleThroughTheRootIsRefused) {
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1)};
  toy.producers[toy.k(1)] = {toy.k(0)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  try {
    g.start();
    FAIL() << "no GraphError";
  } catch (const sw::autograd::GraphError& e) {
    EXPECT_EQ(std::string(e.what()), "the autograd graph contains a cycle through the tensor backward started from");
  }
}

TEST(AutogradGraph, CycleBelowTheRootIsRefusedWhenTheOrderRunsDry) {
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1)};
  toy.producers[toy.k(1)] = {toy.k(2)};
  toy.producers[toy.k(2)] = {toy.k(1)};
  BackwardGraph g(toy.k(0));
  toy.discover(g);
  g.start();
  EXPECT_EQ(g.next_ready(), 0u);
  g.finish(0);
  try {
    g.next_ready();
    FAIL() << "no GraphError";
  } catch (const sw::autograd::GraphError& e) {
    EXPECT_EQ(std::string(e.what()), "the autograd graph contains a cycle");
  }
}

TEST(AutogradGraph, MisuseIsALogicError) {
  Toy toy;
  BackwardGraph g(toy.k(0));
  EXPECT_THROW(g.next_ready(), std::logic_error);  // before start()
  EXPECT_THROW(g.start(), std::logic_error);       // node 0 not discovered yet
  ASSERT_EQ(g.next_to_discover(), 0u);
  g.set_leaf(0);
  EXPECT_THROW(g.set_leaf(0), std::logic_error);
  g.start();
  EXPECT_THROW(g.start(), std::logic_error);
  EXPECT_THROW(g.next_to_discover(), std::logic_error);
  EXPECT_THROW(g.key(3), std::out_of_range);
}

TEST(AutogradGraph, DiscoveryHandsOutEachNodeOnce) {
  Toy toy;
  toy.producers[toy.k(0)] = {toy.k(1), toy.k(2), toy.k(1)};
  toy.producers[toy.k(2)] = {toy.k(1)};
  BackwardGraph g(toy.k(0));
  std::vector<NodeKey> seen;
  for (size_t i; (i = g.next_to_discover()) != kNoNode;) {
    seen.push_back(g.key(i));
    auto it = toy.producers.find(g.key(i));
    if (it == toy.producers.end())
      g.set_leaf(i);
    else
      g.set_producer(i, true, it->second);
  }
  EXPECT_EQ(seen.size(), 3u);
  const auto order = run(g);
  EXPECT_LT(position(order, toy.k(2)), position(order, toy.k(1)));
  EXPECT_EQ(g.contributions(g.input_node(0, 0)), 3u);
}

TEST(AutogradRules, SavedInputsState) {
  EXPECT_EQ(sw::autograd::saved_inputs_state(true, false, 2, 2), SavedState::Ok);
  EXPECT_EQ(sw::autograd::saved_inputs_state(true, false, 1, 2), SavedState::CountMismatch);
  EXPECT_EQ(sw::autograd::saved_inputs_state(false, true, 0, 2), SavedState::Freed);
  EXPECT_EQ(sw::autograd::saved_inputs_state(false, false, 0, 1), SavedState::NotRecorded);
}

TEST(AutogradRules, MayRecordOnce) {
  EXPECT_TRUE(sw::autograd::may_record(false, false));
  EXPECT_FALSE(sw::autograd::may_record(true, false));
  EXPECT_FALSE(sw::autograd::may_record(false, true));
}

TEST(AutogradRules, FirstModifiedVersion) {
  EXPECT_EQ(sw::autograd::first_modified({}, {}), kNoNode);
  EXPECT_EQ(sw::autograd::first_modified({1, 2, 3}, {1, 2, 3}), kNoNode);
  EXPECT_EQ(sw::autograd::first_modified({1, 2, 3}, {1, 5, 4}), 1u);
  EXPECT_THROW(sw::autograd::first_modified({1}, {1, 2}), std::invalid_argument);
}

TEST(AutogradRules, ZeroFill) {
  EXPECT_FALSE(sw::autograd::needs_zero_fill(true, 4, 8));
  EXPECT_TRUE(sw::autograd::needs_zero_fill(false, 4, 8));
  EXPECT_FALSE(sw::autograd::needs_zero_fill(false, 4, 4));
}

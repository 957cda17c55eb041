// The reverse-mode pass as a graph over opaque node keys: discovery of what
// is reachable from the root, consumer counts, Kahn execution order,
// routing of each input slot's gradient to its node, the set of nodes whose
// .grad is committed, and the rules of recorded nodes (freed graphs,
// modified saved inputs, result counts). The binding owns the tensors and
// operations and calls each operation's backward; this file owns only the
// order and the decisions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace sw::autograd {

// Identity of one tensor in a pass (the binding uses its object address).
using NodeKey = const void*;
inline constexpr size_t kNoNode = static_cast<size_t>(-1);

// A graph that cannot run: a cycle (std::runtime_error, so it reaches
// Python as RuntimeError with this message).
struct GraphError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class BackwardGraph {
 public:
  // The root is node 0 and holds the pass's initial gradient.
  explicit BackwardGraph(NodeKey root);

  size_t size() const { return nodes_.size(); }
  NodeKey key(size_t i) const { return nodes_.at(i).key; }

  // ---- discovery (before start())
  // The next node whose producer is still unknown, or kNoNode when every
  // reachable node is known. Each node is handed out once.
  size_t next_to_discover();
  // Node i has no recorded producer (a leaf).
  void set_leaf(size_t i);
  // Node i was produced by an operation. With saved = false the operation
  // holds no saved inputs and inputs must be empty; else inputs[k] is the
  // key of saved input slot k, nullptr when that slot receives no gradient
  // (not a differentiable tensor). New keys become nodes to discover.
  void set_producer(size_t i, bool saved, const std::vector<NodeKey>& inputs);

  // ---- execution
  // Ends discovery; throws GraphError when the root has a consumer.
  void start();
  // The next node whose consumers have all run, or kNoNode when none is
  // left (GraphError when nodes are left that never became ready).
  size_t next_ready();
  // True when node i has an operation with saved inputs (even none at all)
  // and received a gradient: its backward runs with the sum of its
  // contributions.
  bool runs_backward(size_t i) const;
  // Saved input slots of node i's operation (0 for a leaf or an operation
  // without saved inputs).
  size_t slots(size_t i) const { return nodes_.at(i).inputs.size(); }
  // The node receiving slot k's gradient, or kNoNode for a slot that takes
  // none.
  size_t input_node(size_t i, size_t slot) const;
  // One gradient for slot k of node i arrived; returns the node it goes to.
  size_t deliver(size_t i, size_t slot);
  // Node i ran (or had nothing to run): its inputs lose one pending
  // consumer. Call after next_ready() returned i.
  void finish(size_t i);
  // Gradients delivered to node i so far (the root starts with one).
  size_t contributions(size_t i) const { return nodes_.at(i).contributions; }
  // Whether node i's .grad is written when the pass succeeds: it received a
  // gradient and is a leaf or retains its gradient. Noted in readiness
  // order; committed() lists them.
  bool note_commit(size_t i, bool retains_grad);
  const std::vector<size_t>& committed() const { return commit_; }
  // Nodes produced by an operation (freed after a pass without retain_graph).
  std::vector<size_t> produced() const;
  bool is_leaf(size_t i) const { return !nodes_.at(i).has_op; }

 private:
  struct Node {
    NodeKey key = nullptr;
    bool discovered = false;
    bool has_op = false;
    bool saved = false;          // the operation holds saved inputs
    std::vector<size_t> inputs;  // node per saved slot, kNoNode for none
    size_t pending = 0;          // consumers that have not finished
    size_t contributions = 0;
  };
  size_t add(NodeKey k);

  std::vector<Node> nodes_;
  std::unordered_map<NodeKey, size_t> index_;
  std::vector<size_t> discover_;
  std::vector<size_t> ready_;
  std::vector<size_t> commit_;
  size_t processed_ = 0;
  bool started_ = false;
};

// ---- rules of a recorded operation

// What a node's saved state allows.
enum class SavedState { Ok, NotRecorded, Freed, CountMismatch };
// A backward reading its saved inputs: it needs count of them.
SavedState saved_inputs_state(bool has_inputs, bool graph_freed, size_t found, size_t expected);
// Whether forward may record into an operation that has saved inputs or a
// freed graph (an Operation records one forward pass).
inline bool may_record(bool has_inputs, bool graph_freed) { return !has_inputs && !graph_freed; }
// The first saved input whose carrier version moved since the forward pass,
// or kNoNode. Both vectors hold one version per saved slot.
size_t first_modified(const std::vector<uint64_t>& saved, const std::vector<uint64_t>& now);

// The zero-fill rule of a fresh gradient buffer laid out with size logical
// slots over cosize slots: holes start zeroed unless every slot is written.
inline bool needs_zero_fill(bool writes_every_slot, int64_t size, int64_t cosize) {
  return !writes_every_slot && cosize != size;
}

}  // namespace sw::autograd

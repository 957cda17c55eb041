#include "autograd/graph.hpp"

namespace sw::autograd {

BackwardGraph::BackwardGraph(NodeKey root) {
  add(root);
  nodes_[0].contributions = 1;
}

size_t BackwardGraph::add(NodeKey k) {
  auto it = index_.find(k);
  if (it != index_.end()) return it->second;
  Node n;
  n.key = k;
  nodes_.push_back(std::move(n));
  index_.emplace(k, nodes_.size() - 1);
  discover_.push_back(nodes_.size() - 1);
  return nodes_.size() - 1;
}

size_t BackwardGraph::next_to_discover() {
  if (started_) throw std::logic_error("BackwardGraph: discovery after start()");
  while (!discover_.empty()) {
    const size_t i = discover_.back();
    discover_.pop_back();
    if (!nodes_[i].discovered) return i;
  }
  return kNoNode;
}

void BackwardGraph::set_leaf(size_t i) {
  Node& n = nodes_.at(i);
  if (n.discovered) throw std::logic_error("BackwardGraph: node discovered twice");
  n.discovered = true;
}

void BackwardGraph::set_producer(size_t i, bool saved, const std::vector<NodeKey>& inputs) {
  if (nodes_.at(i).discovered) throw std::logic_error("BackwardGraph: node discovered twice");
  if (!saved && !inputs.empty()) throw std::logic_error("BackwardGraph: inputs without saved inputs");
  std::vector<size_t> slots;
  slots.reserve(inputs.size());
  for (NodeKey k : inputs) {
    if (!k) {
      slots.push_back(kNoNode);
      continue;
    }
    const size_t j = add(k);  // may reallocate nodes_
    nodes_[j].pending += 1;
    slots.push_back(j);
  }
  Node& n = nodes_[i];
  n.discovered = true;
  n.has_op = true;
  n.saved = saved;
  n.inputs = std::move(slots);
}

void BackwardGraph::start() {
  if (started_) throw std::logic_error("BackwardGraph: started twice");
  for (const Node& n : nodes_)
    if (!n.discovered) throw std::logic_error("BackwardGraph: start() before discovery ended");
  started_ = true;
  // Only a cycle gives the root a consumer: nothing else reaches it.
  if (nodes_[0].pending != 0)
    throw GraphError("the autograd graph contains a cycle through the tensor backward started from");
  ready_.push_back(0);
}

size_t BackwardGraph::next_ready() {
  if (!started_) throw std::logic_error("BackwardGraph: next_ready() before start()");
  if (ready_.empty()) {
    if (processed_ != nodes_.size()) throw GraphError("the autograd graph contains a cycle");
    return kNoNode;
  }
  const size_t i = ready_.back();
  ready_.pop_back();
  ++processed_;
  return i;
}

bool BackwardGraph::runs_backward(size_t i) const {
  const Node& n = nodes_.at(i);
  return n.has_op && n.saved && n.contributions > 0;
}

size_t BackwardGraph::input_node(size_t i, size_t slot) const { return nodes_.at(i).inputs.at(slot); }

size_t BackwardGraph::deliver(size_t i, size_t slot) {
  const size_t j = input_node(i, slot);
  if (j == kNoNode) throw std::logic_error("BackwardGraph: a gradient for a slot that takes none");
  nodes_[j].contributions += 1;
  return j;
}

void BackwardGraph::finish(size_t i) {
  for (size_t j : nodes_.at(i).inputs) {
    if (j == kNoNode) continue;
    if (--nodes_[j].pending == 0) ready_.push_back(j);
  }
}

bool BackwardGraph::note_commit(size_t i, bool retains_grad) {
  const Node& n = nodes_.at(i);
  const bool commits = n.contributions > 0 && (!n.has_op || retains_grad);
  if (commits) commit_.push_back(i);
  return commits;
}

std::vector<size_t> BackwardGraph::produced() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].has_op) out.push_back(i);
  return out;
}

SavedState saved_inputs_state(bool has_inputs, bool graph_freed, size_t found, size_t expected) {
  if (!has_inputs) return graph_freed ? SavedState::Freed : SavedState::NotRecorded;
  return found == expected ? SavedState::Ok : SavedState::CountMismatch;
}

size_t first_modified(const std::vector<uint64_t>& saved, const std::vector<uint64_t>& now) {
  if (saved.size() != now.size()) throw std::invalid_argument("saved and current versions differ in count");
  for (size_t k = 0; k < saved.size(); ++k)
    if (saved[k] != now[k]) return k;
  return kNoNode;
}

}  // namespace sw::autograd

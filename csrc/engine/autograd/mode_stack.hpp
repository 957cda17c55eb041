// The re-entrant no_grad scope: one object entered several times without
// exiting keeps the mode before each entry, and each exit restores the mode
// of its entry. Python's context protocol calls entry and exit separately,
// so the stack lives in the object rather than in a C++ scope.
#pragma once
#include <cstdint>

namespace sw::autograd {

class ModeStack {
 public:
  static constexpr int kMaxDepth = 64;

  // Entering saves the current mode; the mode inside is always off.
  // std::runtime_error past kMaxDepth nested entries.
  bool enter(bool current);
  // Returns the mode to restore; std::runtime_error without an entry.
  bool exit();
  int depth() const { return depth_; }

 private:
  uint64_t saved_ = 0;  // bit i: mode before the (i+1)-th nested entry
  int depth_ = 0;
};

}  // namespace sw::autograd

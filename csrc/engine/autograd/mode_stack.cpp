#include "autograd/mode_stack.hpp"

#include <stdexcept>

namespace sw::autograd {

bool ModeStack::enter(bool current) {
  if (depth_ >= kMaxDepth) throw std::runtime_error("no_grad entered more than 64 times without exiting");
  const uint64_t bit = uint64_t{1} << depth_;
  saved_ = current ? (saved_ | bit) : (saved_ & ~bit);
  ++depth_;
  return false;
}

bool ModeStack::exit() {
  if (depth_ == 0) throw std::runtime_error("no_grad exited without a matching enter");
  --depth_;
  return (saved_ >> depth_) & 1;
}

}  // namespace sw::autograd

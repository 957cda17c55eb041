// GoogleTest for the re-entrant no_grad mode stack
// (csrc/engine/autograd/mode_stack.cpp).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "autograd/mode_stack.hpp"

using sw::autograd::ModeStack;

TEST(ModeStack, ExitRestoresTheModeOfItsEntry) {
  ModeStack s;
  bool mode = true;
  mode = s.enter(mode);
  EXPECT_FALSE(mode);
  mode = s.enter(mode);  // nested: entered with grad off
  EXPECT_EQ(s.depth(), 2);
  mode = s.exit();
  EXPECT_FALSE(mode);
  mode = s.exit();
  EXPECT_TRUE(mode);
  EXPECT_EQ(s.depth(), 0);
}

TEST(ModeStack, EachLevelKeepsItsOwnMode) {
  // Entered with on, off, on (the mode changed between entries).
  ModeStack s;
  s.enter(true);
  s.enter(false);
  s.enter(true);
  EXPECT_TRUE(s.exit());
  EXPECT_FALSE(s.exit());
  EXPECT_TRUE(s.exit());
}

TEST(ModeStack, DepthIsBounded) {
  ModeStack s;
  for (int i = 0; i < ModeStack::kMaxDepth; ++i) s.enter(i % 2 == 0);
  try {
    s.enter(true);
    FAIL() << "no error past the depth bound";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "no_grad entered more than 64 times without exiting");
  }
  EXPECT_EQ(s.depth(), ModeStack::kMaxDepth);
  for (int i = ModeStack::kMaxDepth - 1; i >= 0; --i) EXPECT_EQ(s.exit(), i % 2 == 0);
}

TEST(ModeStack, ExitWithoutEnterIsAnError) {
  ModeStack s;
  try {
    s.exit();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "no_grad exited without a matching enter");
  }
  EXPECT_EQ(s.depth(), 0);
}

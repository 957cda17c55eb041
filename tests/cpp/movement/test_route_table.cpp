#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "movement/route_table.hpp"

using sw::movement::ClassKey;
using sw::movement::Retainer;
using sw::movement::RouteTable;

namespace {

std::map<ClassKey, int> g_pins;

Retainer counting() {
  Retainer r;
  r.retain = [](ClassKey k) { ++g_pins[k]; };
  r.release = [](ClassKey k) { --g_pins[k]; };
  return r;
}

constexpr ClassKey CPU = 1, File = 2, Metal = 3, OpA = 10, OpB = 11, Elementwise = 99;

class RouteTableTest : public ::testing::Test {
 protected:
  void SetUp() override { g_pins.clear(); }
};

}  // namespace

TEST_F(RouteTableTest, ResolvesExactPairsElseFallback) {
  RouteTable t(counting());
  EXPECT_FALSE(t.add(CPU, File, OpA));
  EXPECT_EQ(t.resolve(CPU, File, Elementwise), OpA);
  EXPECT_EQ(t.resolve(File, CPU, Elementwise), Elementwise);  // ordered pairs
  EXPECT_EQ(t.resolve(CPU, Metal, Elementwise), Elementwise);
  EXPECT_EQ(t.find(CPU, File), OpA);
  EXPECT_FALSE(t.find(File, CPU));
  EXPECT_EQ(t.size(), 1u);
}

TEST_F(RouteTableTest, ConflictLeavesTheHolder) {
  RouteTable t(counting());
  EXPECT_FALSE(t.add(CPU, File, OpA));
  EXPECT_EQ(t.add(CPU, File, OpB), OpA);
  EXPECT_EQ(t.resolve(CPU, File, Elementwise), OpA);
  EXPECT_EQ(g_pins[OpB], 0);
  EXPECT_EQ(g_pins[OpA], 1);
}

TEST_F(RouteTableTest, EntriesPinTheirClasses) {
  {
    RouteTable t(counting());
    t.add(CPU, File, OpA);
    t.add(File, CPU, OpA);
    EXPECT_EQ(g_pins[CPU], 2);
    EXPECT_EQ(g_pins[File], 2);
    EXPECT_EQ(g_pins[OpA], 2);
    EXPECT_TRUE(t.remove_if(File, CPU, OpA));
    EXPECT_EQ(g_pins[OpA], 1);
  }
  // The table's end releases what is left.
  EXPECT_EQ(g_pins[CPU], 0);
  EXPECT_EQ(g_pins[File], 0);
  EXPECT_EQ(g_pins[OpA], 0);
}

TEST_F(RouteTableTest, RemoveHandsTheOperationPinToTheCaller) {
  RouteTable t(counting());
  t.add(CPU, File, OpA);
  EXPECT_EQ(t.remove(CPU, File), OpA);
  EXPECT_EQ(g_pins[CPU], 0);
  EXPECT_EQ(g_pins[File], 0);
  EXPECT_EQ(g_pins[OpA], 1);  // now the caller's
  EXPECT_FALSE(t.remove(CPU, File));
  EXPECT_EQ(t.size(), 0u);
}

TEST_F(RouteTableTest, RemoveIfOnlyRemovesTheSameOperation) {
  RouteTable t(counting());
  t.add(CPU, File, OpA);
  EXPECT_FALSE(t.remove_if(CPU, File, OpB));
  EXPECT_EQ(t.find(CPU, File), OpA);
  EXPECT_FALSE(t.remove_if(File, CPU, OpA));
  EXPECT_TRUE(t.remove_if(CPU, File, OpA));
  EXPECT_FALSE(t.find(CPU, File));
}

TEST_F(RouteTableTest, ScopeRegistersWhileEntered) {
  RouteTable t(counting());
  RouteTable::Scope scope(CPU, Metal, OpA);
  EXPECT_FALSE(scope.active());
  EXPECT_FALSE(scope.enter(t));
  EXPECT_TRUE(scope.active());
  EXPECT_EQ(t.resolve(CPU, Metal, Elementwise), OpA);
  try {
    scope.enter(t);
    FAIL() << "entered twice";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "registered_move_operation context is already entered");
  }
  EXPECT_THROW(scope.check_enterable(), std::logic_error);
  scope.exit(t);
  EXPECT_FALSE(scope.active());
  EXPECT_FALSE(t.find(CPU, Metal));
  EXPECT_EQ(g_pins[OpA], 0);
  // Reusable once exited.
  EXPECT_NO_THROW(scope.check_enterable());
  EXPECT_FALSE(scope.enter(t));
  scope.exit(t);
}

TEST_F(RouteTableTest, ScopeExitLeavesAReplacedEntryAlone) {
  RouteTable t(counting());
  RouteTable::Scope scope(CPU, Metal, OpA);
  ASSERT_FALSE(scope.enter(t));
  // The body unregistered the pair and registered another operation.
  EXPECT_EQ(t.remove(CPU, Metal), OpA);
  EXPECT_FALSE(t.add(CPU, Metal, OpB));
  scope.exit(t);
  EXPECT_EQ(t.find(CPU, Metal), OpB);
  scope.exit(t);  // a second exit does nothing
  EXPECT_EQ(t.find(CPU, Metal), OpB);
}

TEST_F(RouteTableTest, ScopeStaysOutOfATakenPair) {
  RouteTable t(counting());
  t.add(CPU, Metal, OpB);
  RouteTable::Scope scope(CPU, Metal, OpA);
  EXPECT_EQ(scope.enter(t), OpB);
  EXPECT_FALSE(scope.active());
  scope.exit(t);
  EXPECT_EQ(t.find(CPU, Metal), OpB);
}

TEST_F(RouteTableTest, WorksWithoutARetainer) {
  RouteTable t;
  EXPECT_FALSE(t.add(CPU, File, OpA));
  EXPECT_EQ(t.remove(CPU, File), OpA);
  EXPECT_TRUE(g_pins.empty());
}

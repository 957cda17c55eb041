// RouteTable::generation(): the binding caches resolutions per generation,
// so every change of the table must move it and nothing else may.
#include <gtest/gtest.h>

#include "movement/route_table.hpp"

using sw::movement::ClassKey;
using sw::movement::RouteTable;

namespace {
constexpr ClassKey CPU = 1, File = 2, OpA = 10, OpB = 11;
}  // namespace

TEST(RouteTableGeneration, MovesOnEveryChangeOnly) {
  RouteTable t;
  auto g = t.generation();
  EXPECT_FALSE(t.add(CPU, File, OpA));
  EXPECT_GT(t.generation(), g);
  g = t.generation();
  EXPECT_TRUE(t.add(CPU, File, OpB));  // a conflict changes nothing
  EXPECT_EQ(t.generation(), g);
  (void)t.find(CPU, File);
  (void)t.resolve(File, CPU, OpB);
  EXPECT_EQ(t.generation(), g);
  EXPECT_EQ(t.remove(CPU, File), OpA);
  EXPECT_GT(t.generation(), g);
  g = t.generation();
  EXPECT_FALSE(t.remove(CPU, File));  // nothing to remove
  EXPECT_EQ(t.generation(), g);
}

TEST(RouteTableGeneration, ScopesMoveIt) {
  RouteTable t;
  RouteTable::Scope s(CPU, File, OpA);
  auto g = t.generation();
  EXPECT_FALSE(s.enter(t));
  EXPECT_GT(t.generation(), g);
  g = t.generation();
  s.exit(t);
  EXPECT_GT(t.generation(), g);
  g = t.generation();
  EXPECT_FALSE(t.remove_if(CPU, File, OpA));  // already gone
  EXPECT_EQ(t.generation(), g);
  // Re-adding the same entry never brings back an earlier generation.
  const auto before = t.generation();
  EXPECT_FALSE(t.add(CPU, File, OpA));
  EXPECT_NE(t.generation(), before);
}

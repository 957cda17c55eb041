#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "profiling/event_store.hpp"

using sw::profiling::Event;
using sw::profiling::EventStore;
using sw::profiling::Key;
using sw::profiling::KeyOps;
using sw::profiling::SessionState;

namespace {

std::map<Key, int> g_pins;

// Classes: 1 Carrier, 2 CPU(Carrier), 3 FileBacked(Carrier), 4 MyCPU(CPU).
bool is_subclass(Key cls, Key base) {
  if (cls == base) return true;
  if (base == 1) return cls >= 2 && cls <= 4;
  if (base == 2) return cls == 4;
  return false;
}

KeyOps ops() {
  KeyOps o;
  o.retain = [](Key k) { ++g_pins[k]; };
  o.release = [](Key k) { --g_pins[k]; };
  o.is_subclass = is_subclass;
  return o;
}

Event event(int64_t id, Key carrier, Key impl = 0, Key shapes = 0) {
  Event e;
  e.id = id;
  e.name = "move.submit";
  e.carrier_type = carrier;
  e.implementation_type = impl;
  e.input_shapes = shapes;
  e.start_ns = 5;
  e.duration_ns = 7;
  e.thread_id = 9;
  e.succeeded = true;
  return e;
}

class EventStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { g_pins.clear(); }
};

}  // namespace

TEST_F(EventStoreTest, LifecycleIsSingleUse) {
  EventStore s(ops(), {}, false, false);
  EXPECT_EQ(s.state(), SessionState::New);
  EXPECT_FALSE(s.active());
  s.exit();  // not entered: nothing changes
  EXPECT_EQ(s.state(), SessionState::New);
  s.enter();
  EXPECT_TRUE(s.active());
  try {
    s.enter();
    FAIL() << "entered twice";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "a profile context is single-use and was already entered");
  }
  s.exit();
  EXPECT_EQ(s.state(), SessionState::Finished);
  EXPECT_THROW(s.enter(), std::logic_error);
}

TEST_F(EventStoreTest, FinishAbandonsAnyState) {
  EventStore s(ops(), {}, false, false);
  s.finish();
  EXPECT_EQ(s.state(), SessionState::Finished);
  EXPECT_THROW(s.enter(), std::logic_error);
}

TEST_F(EventStoreTest, IdsAreUniqueFromOne) {
  EventStore s(ops(), {}, false, false);
  EXPECT_EQ(s.new_id(), 1);
  EXPECT_EQ(s.new_id(), 2);
  EXPECT_EQ(s.new_id(), 3);
}

TEST_F(EventStoreTest, RecordsAndPinsEvents) {
  {
    EventStore s(ops(), {}, false, true);
    s.record(event(1, 2, 10, 20));
    s.record(event(2, 0, 10));
    ASSERT_EQ(s.size(), 2u);
    const Event e = s.at(0);
    EXPECT_EQ(e.id, 1);
    EXPECT_EQ(e.name, "move.submit");
    EXPECT_EQ(e.carrier_type, 2u);
    EXPECT_EQ(e.implementation_type, 10u);
    EXPECT_EQ(e.input_shapes, 20u);
    EXPECT_EQ(e.start_ns, 5);
    EXPECT_EQ(e.duration_ns, 7);
    EXPECT_EQ(e.thread_id, 9u);
    EXPECT_TRUE(e.succeeded);
    EXPECT_EQ(g_pins[2], 1);
    EXPECT_EQ(g_pins[10], 2);
    EXPECT_EQ(g_pins[20], 1);
    EXPECT_EQ(g_pins.count(0), 0u);  // no key, no pin
    EXPECT_THROW(s.at(2), std::out_of_range);
  }
  for (const auto& [k, n] : g_pins) EXPECT_EQ(n, 0) << k;
}

TEST_F(EventStoreTest, DropsShapesUnlessRecorded) {
  EventStore s(ops(), {}, false, false);
  s.record(event(1, 2, 10, 20));
  EXPECT_EQ(s.at(0).input_shapes, 0u);
  EXPECT_EQ(g_pins[20], 0);
}

TEST_F(EventStoreTest, CarrierFilterKeepsSubclassesOnly) {
  EventStore s(ops(), {2}, true, false);
  EXPECT_EQ(g_pins[2], 1);  // the filter's class is pinned
  EXPECT_TRUE(s.passes(2));
  EXPECT_TRUE(s.passes(4));
  EXPECT_FALSE(s.passes(3));
  EXPECT_FALSE(s.passes(0));
  s.record(event(1, 3));
  s.record(event(2, 4));
  s.record(event(3, 0));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.at(0).id, 2);
  EXPECT_EQ(g_pins[3], 0);
}

TEST_F(EventStoreTest, EmptyFilterKeepsNothing) {
  EventStore s(ops(), {}, true, false);
  s.record(event(1, 2));
  EXPECT_EQ(s.size(), 0u);
}

TEST_F(EventStoreTest, VisitKeysSeesFilterAndEventKeys) {
  EventStore s(ops(), {1}, true, true);
  s.record(event(1, 2, 10, 20));
  std::vector<Key> seen;
  EXPECT_EQ(s.visit_keys([&](Key k) {
    seen.push_back(k);
    return 0;
  }),
            0);
  EXPECT_EQ(seen, (std::vector<Key>{1, 2, 10, 20}));
  int calls = 0;
  EXPECT_EQ(s.visit_keys([&](Key) { return ++calls == 2 ? 7 : 0; }), 7);
  EXPECT_EQ(calls, 2);
}

TEST_F(EventStoreTest, ClearReleasesEverythingAndDropsTheFilter) {
  EventStore s(ops(), {2}, true, true);
  s.record(event(1, 2, 10, 20));
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  for (const auto& [k, n] : g_pins) EXPECT_EQ(n, 0) << k;
  EXPECT_TRUE(s.passes(3));
}

TEST(OpenEvents, InnermostOpenEventOfTheSessionIsTheParent) {
  int s1 = 0, s2 = 0;
  EXPECT_EQ(sw::profiling::parent_id(&s1), 0);
  sw::profiling::push_open(&s1, 5);
  sw::profiling::push_open(&s2, 6);
  sw::profiling::push_open(&s1, 7);
  EXPECT_EQ(sw::profiling::parent_id(&s1), 7);
  EXPECT_EQ(sw::profiling::parent_id(&s2), 6);
  int64_t other = -1;
  std::thread([&] { other = sw::profiling::parent_id(&s1); }).join();
  EXPECT_EQ(other, 0);  // per thread
  sw::profiling::pop_open(&s1);
  EXPECT_EQ(sw::profiling::parent_id(&s1), 5);
  sw::profiling::pop_open(&s2);
  EXPECT_EQ(sw::profiling::parent_id(&s2), 0);
  EXPECT_EQ(sw::profiling::parent_id(&s1), 5);
  sw::profiling::pop_open(&s1);
  sw::profiling::pop_open(&s1);  // nothing open: nothing happens
  EXPECT_EQ(sw::profiling::parent_id(&s1), 0);
}

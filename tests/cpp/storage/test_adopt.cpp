// AlignedBuffer::adopt: a foreign range is viewed in place, never zeroed or
// freed, and its ForeignRelease runs exactly once: at release() without
// exports, else when the last export reference is dropped.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "storage/aligned_buffer.hpp"

namespace {

using sw::AlignedBuffer;
using sw::ForeignRelease;

struct Counter {
  std::atomic<int> calls{0};
};

void count_release(void* ctx) noexcept { static_cast<Counter*>(ctx)->calls.fetch_add(1); }

ForeignRelease counted(Counter& c) { return ForeignRelease{count_release, &c}; }

TEST(StorageAdopt, ViewsTheForeignRangeInPlace) {
  std::vector<float> foreign = {1.f, 2.f, 3.f};
  Counter c;
  AlignedBuffer b;
  b.adopt(foreign.data() + 1, 2 * sizeof(float), counted(c));
  EXPECT_TRUE(b.is_adopted());
  EXPECT_FALSE(b.is_mapped());
  EXPECT_EQ(b.data(), foreign.data() + 1);
  EXPECT_EQ(b.bytes(), 2 * sizeof(float));
  static_cast<float*>(b.data())[0] = 7.f;  // a write lands in the producer's memory
  EXPECT_EQ(foreign[1], 7.f);
  EXPECT_EQ(c.calls.load(), 0);
}

TEST(StorageAdopt, ReleaseWithoutExportsGivesBackAtOnceAndLeavesTheValues) {
  std::vector<int> foreign = {5, 6, 7};
  Counter c;
  AlignedBuffer b;
  b.adopt(foreign.data(), sizeof(int) * foreign.size(), counted(c));
  b.release();
  EXPECT_EQ(c.calls.load(), 1);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_FALSE(b.is_adopted());
  EXPECT_EQ(foreign, (std::vector<int>{5, 6, 7}));  // never zeroed
  b.release();  // idempotent
  EXPECT_EQ(c.calls.load(), 1);
}

TEST(StorageAdopt, DestructorGivesBack) {
  int foreign[2] = {1, 2};
  Counter c;
  {
    AlignedBuffer b;
    b.adopt(foreign, sizeof foreign, counted(c));
  }
  EXPECT_EQ(c.calls.load(), 1);
}

TEST(StorageAdopt, ExportsDeferTheReleaseToTheLastOne) {
  std::vector<float> foreign = {1.f, 2.f};
  Counter c;
  AlignedBuffer b;
  b.adopt(foreign.data(), sizeof(float) * 2, counted(c));
  sw::StorageControl* e1 = b.acquire_export_ref();
  sw::StorageControl* e2 = b.acquire_export_ref();
  ASSERT_NE(e1, nullptr);
  EXPECT_EQ(b.export_refs(), 2u);
  b.release();
  EXPECT_EQ(b.data(), nullptr);  // the owner reports released
  EXPECT_EQ(c.calls.load(), 0);  // exports still address the producer's memory
  EXPECT_EQ(foreign, (std::vector<float>{1.f, 2.f}));  // not retired to zeros
  sw::drop_export_ref(e1);
  EXPECT_EQ(c.calls.load(), 0);
  sw::drop_export_ref(e2);
  EXPECT_EQ(c.calls.load(), 1);
}

TEST(StorageAdopt, ExportsGoneBeforeReleaseLeaveItToRelease) {
  float foreign[1] = {1.f};
  Counter c;
  AlignedBuffer b;
  b.adopt(foreign, sizeof foreign, counted(c));
  sw::drop_export_ref(b.acquire_export_ref());
  EXPECT_EQ(c.calls.load(), 0);
  b.release();
  EXPECT_EQ(c.calls.load(), 1);
}

TEST(StorageAdopt, LastExportOnAnotherThread) {
  for (int round = 0; round < 50; ++round) {
    float foreign[4] = {};
    Counter c;
    AlignedBuffer b;
    b.adopt(foreign, sizeof foreign, counted(c));
    std::vector<sw::StorageControl*> refs;
    for (int k = 0; k < 4; ++k) refs.push_back(b.acquire_export_ref());
    std::thread t([&] {
      for (auto* r : refs) sw::drop_export_ref(r);
    });
    b.release();
    t.join();
    EXPECT_EQ(c.calls.load(), 1) << "round " << round;
  }
}

TEST(StorageAdopt, MoveCarriesTheOwnershipAndAllocateGivesBackFirst) {
  float foreign[2] = {};
  Counter c;
  AlignedBuffer a;
  a.adopt(foreign, sizeof foreign, counted(c));
  AlignedBuffer b(std::move(a));
  EXPECT_FALSE(a.is_adopted());
  EXPECT_TRUE(b.is_adopted());
  a.release();
  EXPECT_EQ(c.calls.load(), 0);
  AlignedBuffer d;
  d = std::move(b);
  EXPECT_EQ(c.calls.load(), 0);
  d.allocate(16, true);  // own storage again: the adopted range goes back
  EXPECT_EQ(c.calls.load(), 1);
  EXPECT_FALSE(d.is_adopted());
  EXPECT_NE(d.data(), static_cast<void*>(foreign));
}

TEST(StorageAdopt, AdoptingAgainGivesTheFirstRangeBackFirst) {
  float first[2] = {}, second[2] = {};
  Counter c1, c2;
  AlignedBuffer b;
  b.adopt(first, sizeof first, counted(c1));
  b.adopt(second, sizeof second, counted(c2));
  EXPECT_EQ(c1.calls.load(), 1);
  EXPECT_EQ(c2.calls.load(), 0);
  EXPECT_EQ(b.data(), static_cast<void*>(second));
  b.release();
  EXPECT_EQ(c1.calls.load(), 1);
  EXPECT_EQ(c2.calls.load(), 1);
}

TEST(StorageAdopt, AdoptingOverOwnStorageFreesItAndKeepsNothingOfIt) {
  float foreign[4] = {1.f, 2.f, 3.f, 4.f};
  Counter c;
  AlignedBuffer b;
  b.allocate(1 << 20, true);  // heap storage of its own (a mapping from 32 MiB)
  b.adopt(foreign, sizeof foreign, counted(c));
  EXPECT_TRUE(b.is_adopted());
  EXPECT_FALSE(b.is_mapped());
  EXPECT_EQ(b.bytes(), sizeof foreign);
  // An export of the adopted range must not carry the old storage's state.
  sw::StorageControl* e = b.acquire_export_ref();
  ASSERT_NE(e, nullptr);
  b.release();
  EXPECT_EQ(c.calls.load(), 0);  // the export still reads it
  sw::drop_export_ref(e);
  EXPECT_EQ(c.calls.load(), 1);
  EXPECT_EQ(foreign[3], 4.f);  // never zeroed
}

TEST(StorageAdopt, AdoptingAfterReleaseStartsFresh) {
  float first[1] = {}, second[1] = {};
  Counter c1, c2;
  AlignedBuffer b;
  b.adopt(first, sizeof first, counted(c1));
  b.release();
  b.adopt(second, sizeof second, counted(c2));
  EXPECT_EQ(c1.calls.load(), 1);
  EXPECT_EQ(c2.calls.load(), 0);
  EXPECT_EQ(b.export_refs(), 0u);
}

TEST(StorageAdopt, NullReleaseIsAllowed) {
  float foreign[1] = {};
  AlignedBuffer b;
  b.adopt(foreign, sizeof foreign, ForeignRelease{});
  sw::StorageControl* e = b.acquire_export_ref();
  b.release();
  sw::drop_export_ref(e);  // nothing to call, nothing freed
  SUCCEED();
}

}  // namespace

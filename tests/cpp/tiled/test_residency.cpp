// GoogleTest for the residency state and request registration
// (tiled/residency.hpp): counts, buffers, conflicts, atomic commit,
// deferred evictions and the fork reset.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "tiled/residency.hpp"

using sw::tiled::Buffer;
using sw::tiled::Location;
using sw::tiled::Request;
using sw::tiled::Residency;

namespace {

Buffer buf(int i) { return reinterpret_cast<Buffer>(static_cast<uintptr_t>(0x1000 + 16 * i)); }

}  // namespace

TEST(TiledResidency, ResetSetsEveryTileAndTheCounts) {
  Residency r;
  r.reset(5, Location::Secondary, false);
  EXPECT_EQ(r.tiles(), 5);
  EXPECT_EQ(r.count(Location::Secondary), 5);
  EXPECT_EQ(r.location(4), Location::Secondary);
  EXPECT_FALSE(r.dirty(4));
  r.reset(3, Location::Primary, true);
  EXPECT_EQ(r.slab_tiles(), 3);
  EXPECT_EQ(r.dirty_count(), 3);
  EXPECT_STREQ(sw::tiled::to_string(Location::Implicit), "implicit");
}

TEST(TiledResidency, BuffersFollowPrimaryResidency) {
  Residency r;
  r.reset(4, Location::Secondary, false);
  std::vector<Buffer> freed;
  r.set(1, Location::Primary, false, buf(1), &freed);
  r.set(2, Location::Primary, true, nullptr, &freed);  // in the slab
  EXPECT_EQ(r.buffer(1), buf(1));
  EXPECT_EQ(r.slab_tiles(), 1);
  EXPECT_EQ(r.count(Location::Primary), 2);
  EXPECT_EQ(r.dirty_count(), 1);
  r.set(1, Location::Secondary, false, buf(9), &freed);  // leaving primary drops the buffer
  EXPECT_EQ(freed, std::vector<Buffer>{buf(1)});
  EXPECT_EQ(r.buffer(1), nullptr);
  EXPECT_EQ(r.buffers().size(), 0u);
}

TEST(TiledResidency, ResidencyRequestsConflictWithAnyPendingWork) {
  Residency r;
  r.reset(6, Location::Primary, true);
  Request proj;
  proj.reads = {0, 1};
  r.register_request(proj);
  EXPECT_TRUE(r.busy(0));
  EXPECT_EQ(r.readers(1), 1);
  EXPECT_EQ(r.residency_conflict({4, 1}), 1);
  EXPECT_EQ(r.data_conflict({0, 1}), -1);  // readers do not block other readers
  Request evict;
  evict.kind = Request::Kind::Residency;
  evict.writes = {3, 4};
  r.register_request(evict);
  EXPECT_TRUE(r.in_residency_request(3));
  EXPECT_TRUE(r.any_in_residency_request());
  EXPECT_EQ(r.data_conflict({2, 4}), 4);
  const int64_t any = r.data_conflict_all();
  EXPECT_TRUE(any == 3 || any == 4);
  EXPECT_EQ(r.pending(), 2);
  r.unregister(proj);
  r.unregister(proj);  // idempotent
  EXPECT_FALSE(r.busy(0));
  r.unregister(evict);
  EXPECT_EQ(r.pending(), 0);
  EXPECT_FALSE(r.any_in_residency_request());
  EXPECT_EQ(r.residency_conflict({0, 1, 2, 3, 4, 5}), -1);
}

TEST(TiledResidency, APolicyPromotionIsNoConflictForReaders) {
  Residency r;
  r.reset(3, Location::Secondary, false);
  Request data;  // a projection whose plan promotes tile 2
  data.reads = {0};
  data.writes = {2};
  r.register_request(data);
  EXPECT_EQ(r.data_conflict({2}), -1);
  EXPECT_EQ(r.residency_conflict({2}), 2);
  r.unregister(data);
}

TEST(TiledResidency, CommitAppliesEveryChangeAtOnce) {
  Residency r;
  r.reset(3, Location::Secondary, false);
  Request promote;
  promote.kind = Request::Kind::Residency;
  promote.writes = {0, 2};
  promote.changes = {{0, Location::Primary, false, buf(0)}, {2, Location::Primary, false, buf(2)}};
  r.register_request(promote);
  EXPECT_EQ(r.location(0), Location::Secondary);  // nothing before the commit
  std::vector<Buffer> freed;
  r.commit(promote, &freed);
  r.unregister(promote);
  EXPECT_EQ(r.location(0), Location::Primary);
  EXPECT_EQ(r.buffer(2), buf(2));
  EXPECT_TRUE(freed.empty());
}

TEST(TiledResidency, AllTileReadersCountForEveryTile) {
  Residency r;
  r.reset(1 << 20, Location::Implicit, false);
  Request op;
  op.reads_all = true;
  r.register_request(op);
  EXPECT_TRUE(r.busy(123456));
  EXPECT_EQ(r.readers(7), 1);
  EXPECT_EQ(r.residency_conflict({99}), 99);
  r.unregister(op);
  EXPECT_FALSE(r.busy(123456));
}

TEST(TiledResidency, DeferredEvictionsWaitForReadersAndRetains) {
  Residency r;
  r.reset(4, Location::Primary, true);
  Request reader;
  reader.reads = {1};
  Request retainer;
  retainer.retains = {2};
  r.register_request(reader);
  r.register_request(retainer);
  EXPECT_TRUE(r.retained(2));
  r.defer(1);
  r.defer(2);
  r.defer(3);
  EXPECT_EQ(r.take_ready_deferred(), std::vector<int64_t>{3});
  r.unregister(reader);
  EXPECT_EQ(r.take_ready_deferred(), std::vector<int64_t>{1});
  r.unregister(retainer);
  EXPECT_EQ(r.take_ready_deferred(), std::vector<int64_t>{2});
  EXPECT_EQ(r.deferred(), 0u);
}

TEST(TiledResidency, InvalidTilesAreFound) {
  Residency r;
  r.reset(4, Location::Invalid, false);
  r.set(0, Location::Primary, true, nullptr, nullptr);
  EXPECT_EQ(r.first_invalid({0, 3}), 3);
  EXPECT_EQ(r.first_invalid_all(), 1);
  r.reset(4, Location::Implicit, false);
  EXPECT_EQ(r.first_invalid_all(), -1);
}

TEST(TiledResidency, AForkedChildForgetsTheRequests) {
  Residency r;
  r.reset(3, Location::Primary, true);
  Request req;
  req.kind = Request::Kind::Residency;
  req.writes = {1};
  r.register_request(req);
  r.defer(2);
  r.forget_requests();
  EXPECT_EQ(r.pending(), 0);
  EXPECT_FALSE(r.busy(1));
  EXPECT_FALSE(r.any_in_residency_request());
  EXPECT_EQ(r.deferred(), 0u);
  EXPECT_EQ(r.location(1), Location::Primary);
}

TEST(TiledResidency, LargeRequestsAreLinear) {
  // 65,536 tiles in one request: registration, commit and unregistration
  // together well under a second (hash tables, no per-tile scans)
  Residency r;
  r.reset(1 << 16, Location::Primary, true);
  Request evict;
  evict.kind = Request::Kind::Residency;
  for (int64_t k = 0; k < (1 << 16); ++k) {
    evict.writes.push_back(k);
    evict.changes.push_back({k, Location::Secondary, false, nullptr});
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.residency_conflict(evict.writes), -1);
  r.register_request(evict);
  r.commit(evict, nullptr);
  r.unregister(evict);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0);
  EXPECT_EQ(r.count(Location::Secondary), 1 << 16);
}

TEST(TiledResidency, StateIsPagedAndAHugeGridCostsNothingUntilTouched) {
  Residency r;
  const int64_t n = int64_t(1) << 31;
  const auto t0 = std::chrono::steady_clock::now();
  r.reset(n, Location::Implicit, false);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
  EXPECT_EQ(r.location(n - 1), Location::Implicit);
  r.set(n - 1, Location::Primary, true, nullptr, nullptr);  // one page allocated
  r.set(5, Location::Primary, false, nullptr, nullptr);
  EXPECT_EQ(r.location(n - 1), Location::Primary);
  EXPECT_EQ(r.location(n - 2), Location::Implicit);
  EXPECT_EQ(r.where([](Location l, bool) { return l == Location::Primary; }), (std::vector<int64_t>{5, n - 1}));
  EXPECT_EQ(r.where([](Location, bool d) { return d; }), std::vector<int64_t>{n - 1});
  Request req;
  req.reads = {n - 3};
  r.register_request(req);
  EXPECT_TRUE(r.busy(n - 3));
  r.unregister(req);
  EXPECT_FALSE(r.busy(n - 3));
}

TEST(TiledResidency, WhereReadsUntouchedPagesAsTheirStartingState) {
  Residency r;
  r.reset(Residency::kPageTiles * 2 + 3, Location::Secondary, false);
  r.set(1, Location::Primary, true, nullptr, nullptr);
  const auto sec = r.where([](Location l, bool) { return l == Location::Secondary; });
  EXPECT_EQ(static_cast<int64_t>(sec.size()), Residency::kPageTiles * 2 + 2);
  EXPECT_EQ(sec.back(), Residency::kPageTiles * 2 + 2);
  r.reset(10, Location::Invalid, false);
  EXPECT_EQ(r.first_invalid_all(), 0);
}

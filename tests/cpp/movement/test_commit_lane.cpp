#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "movement/commit_lane.hpp"

using sw::movement::CommitLane;

namespace {
int jobs[64];
}

TEST(CommitLane, FirstPosterBecomesTheCommitter) {
  CommitLane lane;
  EXPECT_TRUE(lane.post(&jobs[0], nullptr));
  EXPECT_FALSE(lane.post(&jobs[1], std::make_exception_ptr(std::runtime_error("copy failed"))));
  auto batch = lane.take_batch();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].first, &jobs[0]);
  EXPECT_FALSE(batch[0].second);
  EXPECT_EQ(batch[1].first, &jobs[1]);
  ASSERT_TRUE(batch[1].second);
  EXPECT_THROW(std::rethrow_exception(batch[1].second), std::runtime_error);
  // A post while the committer is still working goes to it.
  EXPECT_FALSE(lane.post(&jobs[2], nullptr));
  EXPECT_EQ(lane.take_batch().size(), 1u);
  // The empty batch ends the turn: the next poster commits.
  EXPECT_TRUE(lane.take_batch().empty());
  EXPECT_TRUE(lane.post(&jobs[3], nullptr));
}

TEST(CommitLane, AbandonDropsQueuedJobsAndStaysClosed) {
  CommitLane lane;
  EXPECT_TRUE(lane.post(&jobs[0], nullptr));
  EXPECT_FALSE(lane.post(&jobs[1], nullptr));
  EXPECT_EQ(lane.abandon(), 2u);
  EXPECT_EQ(lane.queued(), 0u);
  EXPECT_FALSE(lane.post(&jobs[2], nullptr));  // nobody commits any more
}

TEST(CommitLane, ConcurrentPostersCommitEveryJobExactlyOnce) {
  CommitLane lane;
  std::atomic<int> committed[64] = {};
  std::atomic<int> committers{0}, concurrent{0}, max_concurrent{0};
  auto worker = [&](int first) {
    for (int i = first; i < 64; i += 4) {
      if (!lane.post(&jobs[i], nullptr)) continue;
      ++committers;
      for (auto batch = lane.take_batch(); !batch.empty(); batch = lane.take_batch()) {
        // Holding a non-empty batch, this thread is the only committer.
        const int now = ++concurrent;
        int seen = max_concurrent.load();
        while (now > seen && !max_concurrent.compare_exchange_weak(seen, now)) {
        }
        for (auto& e : batch) ++committed[static_cast<int*>(e.first) - jobs];
        --concurrent;
      }
    }
  };
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k) ts.emplace_back(worker, k);
  for (auto& t : ts) t.join();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(committed[i].load(), 1) << i;
  EXPECT_GE(committers.load(), 1);
  EXPECT_EQ(max_concurrent.load(), 1);  // one committer at a time
  EXPECT_EQ(lane.queued(), 0u);
}

TEST(CommitLane, ProcessLaneIsShared) {
  EXPECT_EQ(&sw::movement::commit_lane(), &sw::movement::commit_lane());
}

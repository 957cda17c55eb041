// Engine side of the move hardening (issue 15): unguessable ownership
// tokens, workers blocked on nested work never deadlock the pool past its
// thread cap, and the value-by-value copy walker skips stride-0 repeats.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "runtime/executor.hpp"
#include "carriers/ownership.hpp"
#include "transfer/copy_plan.hpp"

using namespace std::chrono_literals;

TEST(HardeningTokens, PositiveDistinctAndNotACounter) {
  std::vector<int64_t> tokens;
  std::set<int64_t> distinct;
  for (int i = 0; i < 256; ++i) {
    sw::Ownership o;
    const int64_t t = o.claim();
    EXPECT_GT(t, 0);
    tokens.push_back(t);
    distinct.insert(t);
  }
  EXPECT_EQ(distinct.size(), tokens.size());
  std::set<int64_t> steps;
  for (size_t i = 1; i < tokens.size(); ++i) steps.insert(tokens[i] - tokens[i - 1]);
  EXPECT_GT(steps.size(), 1u);                 // no fixed step
  EXPECT_GT(*distinct.rbegin(), int64_t{1} << 40);  // drawn from 63 random bits
}

// 100 jobs, each waiting (in a BlockingScope) for a job it submits itself:
// more than the 64-thread cap, so without the scope the inner jobs would
// never get a worker.
TEST(HardeningExecutor, NestedWaitsPastTheCapDoNotDeadlock) {
  constexpr int kOuter = 100;
  std::atomic<int> finished{0};
  std::atomic<int> started{0};
  sw::Completion all, go;
  for (int i = 0; i < kOuter; ++i) {
    sw::submit([&] {
      ++started;
      go.wait_for(10s);  // hold every worker busy at once
      auto inner = std::make_shared<sw::Completion>();
      sw::submit([inner] { inner->set(); });
      {
        sw::BlockingScope blocked;
        EXPECT_TRUE(sw::on_worker_thread());
        inner->wait_for(20s);
      }
      EXPECT_TRUE(inner->done());
      if (++finished == kOuter) all.set();
    });
  }
  // Jobs past the cap queue until a worker frees up; release them all.
  std::this_thread::sleep_for(50ms);
  go.set();
  ASSERT_TRUE(all.wait_for(60s)) << "finished " << finished.load() << " of " << kOuter;
}

TEST(HardeningExecutor, BlockingScopeOffWorkerDoesNothing) {
  EXPECT_FALSE(sw::on_worker_thread());
  sw::BlockingScope nothing;
  SUCCEED();
}

TEST(HardeningCopyWalk, StrideZeroOnBothSidesIsWalkedOnce) {
  // 3 x 2^20 x 2^20 coordinates over 3 slots on each side.
  const std::vector<sw::LeafMode> a = {{3, 1}, {1 << 20, 0}, {1 << 20, 0}};
  const std::vector<sw::LeafMode> b = {{3, 2}, {1 << 20, 0}, {1 << 20, 0}};
  std::vector<std::pair<int64_t, int64_t>> seen;
  EXPECT_TRUE(sw::for_each_index_pair(a, b, [&](int64_t ord, int64_t i, int64_t j) {
    EXPECT_EQ(ord, static_cast<int64_t>(seen.size()));
    seen.emplace_back(i, j);
    return true;
  }));
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 0}, {1, 2}, {2, 4}};
  EXPECT_EQ(seen, want);
}

TEST(HardeningCopyWalk, StrideZeroOnOneSideIsStillWalked) {
  // A broadcast source into distinct destination slots: every slot written.
  const std::vector<sw::LeafMode> a = {{4, 0}};
  const std::vector<sw::LeafMode> b = {{4, 1}};
  int n = 0;
  sw::for_each_index_pair(a, b, [&](int64_t, int64_t i, int64_t j) {
    EXPECT_EQ(i, 0);
    EXPECT_EQ(j, n);
    ++n;
    return true;
  });
  EXPECT_EQ(n, 4);
}

TEST(HardeningCopyWalk, MismatchedExtentsThrow) {
  const std::vector<sw::LeafMode> a = {{4, 1}};
  const std::vector<sw::LeafMode> b = {{3, 1}};
  EXPECT_THROW(sw::for_each_index_pair(a, b, [](int64_t, int64_t, int64_t) { return true; }),
               std::invalid_argument);
}

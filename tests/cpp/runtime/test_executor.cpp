#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"

using namespace std::chrono_literals;

TEST(Completion, StartsPendingAndSetsOnce) {
  sw::Completion c;
  EXPECT_FALSE(c.done());
  EXPECT_FALSE(c.wait_for(1ms));
  EXPECT_TRUE(c.set());
  EXPECT_FALSE(c.set());
  EXPECT_TRUE(c.done());
  c.wait();
  EXPECT_TRUE(c.wait_for(0ms));
}

TEST(Completion, WakesEveryWaiter) {
  sw::Completion c;
  std::atomic<int> woke{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) ts.emplace_back([&] { c.wait(); ++woke; });
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(woke.load(), 0);
  c.set();
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke.load(), 8);
}

TEST(Executor, RunsJobOnAnotherThread) {
  sw::Completion c;
  std::thread::id ran;
  sw::submit([&] { ran = std::this_thread::get_id(); c.set(); });
  ASSERT_TRUE(c.wait_for(10s));
  EXPECT_NE(ran, std::this_thread::get_id());
  EXPECT_GE(sw::executor_thread_count(), 1u);
  EXPECT_GE(sw::executor_core_threads(), 2u);
  EXPECT_LE(sw::executor_core_threads(), 4u);
}

TEST(Executor, RunsManyJobs) {
  constexpr int kJobs = 200;
  std::atomic<int> n{0};
  sw::Completion all;
  for (int i = 0; i < kJobs; ++i)
    sw::submit([&] { if (++n == kJobs) all.set(); });
  ASSERT_TRUE(all.wait_for(10s));
  EXPECT_EQ(n.load(), kJobs);
}

// Jobs blocked on each other's progress must not starve: more blocked jobs
// than core threads still let a later job run.
TEST(Executor, BlockedJobsDoNotStarveLaterOnes) {
  const size_t blockers = sw::executor_core_threads() + 2;
  sw::Completion release, later;
  std::atomic<size_t> finished{0};
  sw::Completion all_finished;
  for (size_t i = 0; i < blockers; ++i)
    sw::submit([&] {
      release.wait();
      if (++finished == blockers) all_finished.set();
    });
  sw::submit([&] { later.set(); });
  EXPECT_TRUE(later.wait_for(10s));
  release.set();
  ASSERT_TRUE(all_finished.wait_for(10s));
}

TEST(Executor, ThrowingJobDoesNotKillWorkers) {
  sw::submit([] { throw 42; });
  sw::Completion c;
  sw::submit([&] { c.set(); });
  EXPECT_TRUE(c.wait_for(10s));
}

TEST(Executor, PendingCountReturnsToZero) {
  sw::Completion gate, done;
  sw::submit([&] { gate.wait(); done.set(); });
  EXPECT_GE(sw::executor_pending_jobs(), 1u);
  gate.set();
  ASSERT_TRUE(done.wait_for(10s));
  for (int i = 0; i < 1000 && sw::executor_pending_jobs() != 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(sw::executor_pending_jobs(), 0u);
}

// A waiter that destroys the Completion as soon as wait() returns must not
// race the setter (set() touches nothing after releasing its lock).
TEST(Completion, WaiterMayDestroyItRightAfterWaking) {
  for (int round = 0; round < 2000; ++round) {
    auto* c = new sw::Completion();
    std::thread setter([c] { c->set(); });
    c->wait();
    delete c;
    setter.join();
  }
}

// A worker blocked on nested work never deadlocks the pool past its thread
// cap: 100 jobs, each waiting (in a BlockingScope) for a job it submits itself:
// more than the 64-thread cap, so without the scope the inner jobs would
// never get a worker.
TEST(Executor, NestedWaitsPastTheCapDoNotDeadlock) {
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

TEST(Executor, BlockingScopeOffWorkerDoesNothing) {
  EXPECT_FALSE(sw::on_worker_thread());
  sw::BlockingScope nothing;
  SUCCEED();
}

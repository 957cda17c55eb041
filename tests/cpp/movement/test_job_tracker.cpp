#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "movement/job_tracker.hpp"
#include "runtime/clock.hpp"
#include "runtime/executor.hpp"

using sw::movement::DrainReport;
using sw::movement::JobTracker;
using sw::movement::RunningJob;

namespace {
int a, b, c;  // addresses as job handles
}

TEST(JobTracker, CountsAndTracksJobs) {
  JobTracker t;
  t.begin(&a, true);
  t.begin(&b, false);
  EXPECT_EQ(t.in_flight(), 2u);
  EXPECT_TRUE(t.pending(&a));
  EXPECT_FALSE(t.pending(&b));
  t.untrack(&a);
  EXPECT_FALSE(t.pending(&a));
  EXPECT_EQ(t.in_flight(), 2u);  // the worker ends it after the commit
  t.end();
  t.end();
  EXPECT_EQ(t.in_flight(), 0u);
}

TEST(JobTracker, CancelUndoesBegin) {
  JobTracker t;
  t.begin(&a, true);
  t.cancel(&a);
  EXPECT_EQ(t.in_flight(), 0u);
  EXPECT_FALSE(t.pending(&a));
}

TEST(JobTracker, LaunchRunsTheJobOnAWorker) {
  JobTracker t;
  sw::Completion ran;
  std::thread::id worker;
  t.launch(&a, true, [&] {
    worker = std::this_thread::get_id();
    t.untrack(&a);
    t.end();
    ran.set();
  });
  ASSERT_TRUE(ran.wait_for(std::chrono::seconds(10)));
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_EQ(t.in_flight(), 0u);
  EXPECT_FALSE(t.pending(&a));
}

TEST(JobTracker, LaunchAfterShutdownRunsNothing) {
  JobTracker t;
  t.drain(0.0, [] { return true; });
  bool ran = false;
  EXPECT_THROW(t.launch(&a, true, [&] { ran = true; }), std::runtime_error);
  EXPECT_EQ(t.in_flight(), 0u);
  EXPECT_FALSE(t.pending(&a));
  EXPECT_FALSE(ran);
}

TEST(JobTracker, RefusesJobsOnceShutdownBegan) {
  JobTracker t;
  EXPECT_NO_THROW(t.check_accepting());
  const DrainReport r = t.drain(0.0, [] { return true; });
  EXPECT_EQ(r.left, 0u);
  EXPECT_TRUE(t.shutting_down());
  try {
    t.begin(&a, true);
    FAIL() << "begin() accepted a job after shutdown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot start a move: interpreter shutdown has begun");
  }
  EXPECT_EQ(t.in_flight(), 0u);
  EXPECT_FALSE(t.pending(&a));
  EXPECT_THROW(t.check_accepting(), std::runtime_error);
}

TEST(JobTracker, DrainWaitsForInFlightJobs) {
  JobTracker t;
  t.begin(&a, true);
  std::thread worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    t.untrack(&a);
    t.end();
  });
  const DrainReport r = t.drain(10.0, [] { return true; });
  worker.join();
  EXPECT_EQ(r.left, 0u);
  EXPECT_FALSE(r.interrupted);
  EXPECT_GE(r.waited_s, 0.02);
  EXPECT_EQ(r.warning(), "");
}

TEST(JobTracker, DrainTimesOutAndReports) {
  JobTracker t;
  t.begin(&a, true);
  t.begin(&b, true);
  const DrainReport r = t.drain(0.05, [] { return true; });
  EXPECT_EQ(r.left, 2u);
  EXPECT_FALSE(r.interrupted);
  EXPECT_GE(r.waited_s, 0.05);
  EXPECT_NE(r.warning().find("abandoning 2 move(s) still pending at interpreter exit (timed out after 0."),
            std::string::npos)
      << r.warning();
  EXPECT_NE(r.warning().find("set STRIDEWEAVE_EXIT_TIMEOUT to wait longer"), std::string::npos);
}

TEST(JobTracker, DrainStopsWhenInterrupted) {
  JobTracker t;
  t.begin(&a, true);
  int polls = 0;
  const int64_t start = sw::now_ns();
  const DrainReport r = t.drain(60.0, [&] { return ++polls < 3; });
  EXPECT_LT(sw::now_ns() - start, int64_t(5'000'000'000));
  EXPECT_EQ(polls, 3);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.left, 1u);
  EXPECT_NE(r.warning().find("(interrupted after"), std::string::npos) << r.warning();
}

TEST(JobTracker, ForkChildFailsPendingJobsButTheRunningOne) {
  JobTracker t;
  t.begin(&a, true);
  t.begin(&b, true);
  t.begin(&c, false);
  auto fail = t.after_fork_child(&b);
  std::sort(fail.begin(), fail.end());
  EXPECT_EQ(fail, std::vector<void*>({&a}));
  EXPECT_EQ(t.in_flight(), 0u);
  EXPECT_TRUE(t.pending(&b));  // continued by the forking thread
  EXPECT_FALSE(t.pending(&a));
  EXPECT_EQ(t.after_fork_child(nullptr), std::vector<void*>({&b}));
}

TEST(RunningJob, MarksThisThreadOnly) {
  EXPECT_EQ(RunningJob::current(), nullptr);
  {
    RunningJob running(&a);
    EXPECT_EQ(RunningJob::current(), &a);
    void* seen = &b;
    std::thread([&] { seen = RunningJob::current(); }).join();
    EXPECT_EQ(seen, nullptr);
  }
  EXPECT_EQ(RunningJob::current(), nullptr);
}

TEST(ExitTimeout, ParsesNonNegativeNumbersElseTen) {
  EXPECT_EQ(sw::movement::exit_timeout_s(nullptr), 10.0);
  EXPECT_EQ(sw::movement::exit_timeout_s(""), 10.0);
  EXPECT_EQ(sw::movement::exit_timeout_s("2.5"), 2.5);
  EXPECT_EQ(sw::movement::exit_timeout_s("0"), 0.0);
  EXPECT_EQ(sw::movement::exit_timeout_s("-1"), 10.0);
  EXPECT_EQ(sw::movement::exit_timeout_s("3s"), 10.0);
  EXPECT_EQ(sw::movement::exit_timeout_s("nan"), 10.0);
}

TEST(Deadline, SaturatesForHugeTimeouts) {
  EXPECT_EQ(sw::movement::deadline_after(100, 1.5), 100 + 1'500'000'000);
  EXPECT_EQ(sw::movement::deadline_after(100, 1e300), 100 + int64_t(1e18));
}

// run_parallel_captured's chunk claiming: every chunk runs exactly once
// whoever claims it, the caller never waits for a helper that has not
// started, and a helper that starts after the caller returned touches
// nothing of the finished copy.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"
#include "transfer/copy_plan.hpp"
#include "transfer/parallel_copy.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using sw::CopyEndpoint;
using sw::CopyPlan;

namespace {

// Holds `count` pool workers inside a job until release().
struct Occupy {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> inside{0};

  void hold(int count) {
    for (int k = 0; k < count; ++k)
      sw::submit([this] {
        ++inside;
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [this] { return open; });
        --inside;
      });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(m);
      open = true;
    }
    cv.notify_all();
  }
};

}  // namespace

TEST(ParallelChunks, ManyChunksCopyEverySlotOnce) {
  // 1 MiB of floats in 4 KiB chunks: 256 chunks shared by 4 threads.
  const size_t n = size_t(1) << 18;
  std::vector<float> src = iota(n), dst(n, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(src), 0, host(dst), 0, n), 4, 4096), nullptr);
  EXPECT_EQ(dst, src);
}

TEST(ParallelChunks, LateHelpersFindNothingToDo) {
  // Fresh storage every round, freed as soon as the call returns: a helper
  // job that runs after that must not touch it (ASan reports it if one
  // does). The first rounds run while every core worker is held busy, so
  // the helpers start late (on extra workers) or after the caller finished.
  Occupy busy;
  busy.hold(static_cast<int>(sw::executor_core_threads()));
  for (int round = 0; round < 200; ++round) {
    if (round == 100) busy.release();
    const size_t n = 4096 + static_cast<size_t>(round) * 64;
    auto src = std::make_unique<std::vector<float>>(iota(n));
    auto dst = std::make_unique<std::vector<float>>(n, 0.0f);
    ASSERT_EQ(sw::run_parallel_captured(CopyPlan::span(host(*src), 0, host(*dst), 0, n), 2, 4096), nullptr);
    ASSERT_EQ(*dst, *src) << "round " << round;
  }
  busy.release();
  // Let the queued helpers run out before the test ends.
  for (int k = 0; k < 500 && sw::executor_pending_jobs() != 0; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

TEST(ParallelChunks, SmallPlansAndOneWayRunOnTheCaller) {
  std::vector<float> src = iota(1000), dst(1000, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(src), 0, host(dst), 0, 1000), 4, 1 << 20), nullptr);
  EXPECT_EQ(dst, src);
  std::vector<float> out(1000, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(src), 0, host(out), 0, 1000), 1, 1), nullptr);
  EXPECT_EQ(out, src);
}

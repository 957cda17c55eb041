// run_parallel_captured's chunk claiming: every chunk runs exactly once
// whoever claims it, the caller never waits for a helper that has not
// started, and a helper that starts after the caller returned touches
// nothing of the finished copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/pieces.hpp"
#include "transfer/copy_plan.hpp"
#include "transfer/parallel_copy.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using sw::CopyEndpoint;
using sw::CopyPlan;

namespace {

// Holds every piece helper (and a thread of its own) inside a piece until
// release(), so the copies meanwhile get no helper until then.
struct Occupy {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> inside{0};
  std::thread holder;

  void hold() {
    const int helpers = static_cast<int>(std::max<size_t>(sw::piece_helper_count(), 1));
    holder = std::thread([this, helpers] {
      sw::run_pieces(static_cast<size_t>(helpers) + 1, [this](size_t) {
        ++inside;
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [this] { return open; });
        --inside;
      }, helpers + 1);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (inside.load() < helpers + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(m);
      open = true;
    }
    cv.notify_all();
    if (holder.joinable()) holder.join();
  }
  ~Occupy() { release(); }
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
  // that runs after that must not touch it (ASan reports it if one does).
  // The first rounds run while every piece helper is held busy, so their
  // entries wait and are withdrawn; then the helpers come free mid-run and
  // race the callers.
  Occupy busy;
  busy.hold();
  for (int round = 0; round < 200; ++round) {
    if (round == 100) busy.release();
    const size_t n = 4096 + static_cast<size_t>(round) * 64;
    auto src = std::make_unique<std::vector<float>>(iota(n));
    auto dst = std::make_unique<std::vector<float>>(n, 0.0f);
    ASSERT_EQ(sw::run_parallel_captured(CopyPlan::span(host(*src), 0, host(*dst), 0, n), 2, 4096), nullptr);
    ASSERT_EQ(*dst, *src) << "round " << round;
  }
  busy.release();
}

TEST(ParallelChunks, SmallPlansAndOneWayRunOnTheCaller) {
  std::vector<float> src = iota(1000), dst(1000, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(src), 0, host(dst), 0, 1000), 4, 1 << 20), nullptr);
  EXPECT_EQ(dst, src);
  std::vector<float> out(1000, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(src), 0, host(out), 0, 1000), 1, 1), nullptr);
  EXPECT_EQ(out, src);
}

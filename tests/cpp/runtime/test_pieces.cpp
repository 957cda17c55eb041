#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/pieces.hpp"

using namespace std::chrono_literals;

TEST(Pieces, RunsEachPieceOnce) {
  for (int ways : {1, 2, 4}) {
    std::vector<std::atomic<int>> hits(37);
    sw::run_pieces(hits.size(), [&](size_t i) { hits[i].fetch_add(1); }, ways);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
  sw::run_pieces(0, [](size_t) { ADD_FAILURE(); });
}

// With two ways, a piece that waits until a second thread has started a
// piece only finishes because a helper really runs pieces concurrently with
// the caller (each waits at most 10 s, so a missing helper fails, not hangs).
TEST(Pieces, AHelperRunsPiecesBesideTheCaller) {
  std::mutex m;
  std::set<std::thread::id> ran;
  std::atomic<int> started{0};
  std::atomic<bool> met{false};
  sw::run_pieces(2, [&](size_t) {
    {
      std::lock_guard<std::mutex> lk(m);
      ran.insert(std::this_thread::get_id());
    }
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started.load() == 2) met = true;
  }, 2);
  EXPECT_TRUE(met.load());
  EXPECT_EQ(ran.size(), 2u);
  EXPECT_GE(sw::piece_helper_count(), 1u);
}

// Helpers are their own threads, not the executor's workers: a copy runs
// in parallel even while every worker is held by a blocked move job.
TEST(Pieces, HelpersDoNotWaitForBusyExecutorWorkers) {
  const size_t held = sw::executor_core_threads();
  sw::Completion release;
  std::atomic<size_t> holding{0};
  for (size_t k = 0; k < held; ++k)
    sw::submit([&] {
      holding.fetch_add(1);
      release.wait_for(10s);
    });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (holding.load() < held && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::atomic<int> started{0};
  std::atomic<bool> met{false};
  sw::run_pieces(2, [&](size_t) {
    started.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (started.load() == 2) met = true;
  }, 2);
  release.set();
  EXPECT_TRUE(met.load());
  for (int k = 0; k < 500 && sw::executor_pending_jobs() != 0; ++k) std::this_thread::sleep_for(2ms);
}

// Calls from several threads at once share the helpers; each call still
// runs each of its pieces exactly once and returns only when all ran.
TEST(Pieces, ConcurrentCallersEachGetEveryPieceRun) {
  constexpr int kCallers = 4, kRounds = 200;
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        auto hits = std::make_unique<std::vector<std::atomic<int>>>(9 + r % 7);
        sw::run_pieces(hits->size(), [&](size_t i) { (*hits)[i].fetch_add(1); }, 3);
        for (auto& h : *hits)
          if (h.load() != 1) bad.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

#include "file_io.hpp"
#include "storage.hpp"
#include "tiled_gather.hpp"

namespace {
std::string temp_path(const char* tag) {
  return testing::TempDir() + "sw_tiled_gather_" + tag + "_" + std::to_string(::getpid());
}

std::vector<size_t> flatten(const std::vector<std::vector<size_t>>& lanes) {
  std::vector<size_t> all;
  for (const auto& l : lanes) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  return all;
}
}  // namespace

TEST(TiledGather, LanesBalanceBytesAndKeepOrder) {
  const std::vector<int64_t> bytes{8, 8, 8, 8};
  auto lanes = sw::gather_lanes(bytes, 2, 0);
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(lanes[1], (std::vector<size_t>{1, 3}));
  // one big plan against three small ones
  lanes = sw::gather_lanes({1, 30, 10, 10}, 2, 0);
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0], (std::vector<size_t>{1}));
  EXPECT_EQ(lanes[1], (std::vector<size_t>{0, 2, 3}));
}

TEST(TiledGather, LanesAreBoundedByPlansAndMinimumBytes) {
  EXPECT_EQ(sw::gather_lanes({8, 8}, 8, 0).size(), 2u);   // no more lanes than plans
  EXPECT_EQ(sw::gather_lanes({8, 8}, 2, 16).size(), 1u);  // 16 bytes: one lane of >= 16
  EXPECT_EQ(sw::gather_lanes({8, 8, 8, 8}, 4, 16).size(), 2u);
  EXPECT_EQ(sw::gather_lanes({8, 8}, 0, 0).size(), 1u);   // at least one lane
  auto lanes = sw::gather_lanes({}, 2, 0);
  ASSERT_EQ(lanes.size(), 1u);
  EXPECT_TRUE(lanes[0].empty());
  EXPECT_EQ(flatten(sw::gather_lanes({5, 1, 9, 3, 7}, 3, 0)), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(TiledGather, GathersFileSpansIntoOneCompactBuffer) {
  sw::FileStorage f;
  f.create(temp_path("gather"));
  const int64_t tile = 4096, tiles = 8;
  std::vector<int32_t> src(static_cast<size_t>(tile * tiles));
  std::iota(src.begin(), src.end(), 0);
  sw::file_write_span(f, 0, src.data(), tile * tiles, 4);
  const std::vector<int64_t> pick{5, 1, 6};
  std::vector<int32_t> dst(static_cast<size_t>(tile * 3), -1);
  const auto fs = sw::CopyEndpoint::file_span(f, 4);
  const auto host = sw::CopyEndpoint::host_span(dst.data(), 4);
  std::vector<sw::CopyPlan> plans;
  for (size_t j = 0; j < pick.size(); ++j)
    plans.push_back(sw::CopyPlan::span(fs, pick[j] * tile, host, static_cast<int64_t>(j) * tile, tile));
  for (int ways : {1, 2, 3}) {
    std::fill(dst.begin(), dst.end(), -1);
    ASSERT_EQ(sw::run_gather_captured(plans, ways, 0), nullptr);
    for (size_t j = 0; j < pick.size(); ++j)
      for (int64_t i = 0; i < tile; i += 511)
        ASSERT_EQ(dst[j * tile + i], pick[j] * tile + i) << "ways " << ways << " tile " << j;
  }
}

TEST(TiledGather, HostSpansBothWays) {
  std::vector<float> a(64), b(64, 0.0f);
  std::iota(a.begin(), a.end(), 1.0f);
  const auto ea = sw::CopyEndpoint::host_span(a.data(), 4), eb = sw::CopyEndpoint::host_span(b.data(), 4);
  std::vector<sw::CopyPlan> plans{sw::CopyPlan::span(ea, 32, eb, 0, 32), sw::CopyPlan::span(ea, 0, eb, 32, 32)};
  ASSERT_EQ(sw::run_gather_captured(plans, 2, 0), nullptr);
  EXPECT_EQ(b[0], 33.0f);
  EXPECT_EQ(b[31], 64.0f);
  EXPECT_EQ(b[32], 1.0f);
  EXPECT_EQ(b[63], 32.0f);
}

TEST(TiledGather, AFailingPlanIsReportedAndTheOthersStillFinish) {
  sw::FileStorage f;
  f.create(temp_path("short"));
  std::vector<int32_t> src(100, 7);
  sw::file_write_span(f, 0, src.data(), 100, 4);
  std::vector<int32_t> dst(300, 0);
  const auto fs = sw::CopyEndpoint::file_span(f, 4);
  const auto host = sw::CopyEndpoint::host_span(dst.data(), 4);
  std::vector<sw::CopyPlan> plans{sw::CopyPlan::span(fs, 0, host, 0, 100),
                                  sw::CopyPlan::span(fs, 50, host, 100, 100),  // past the end: short read
                                  sw::CopyPlan::span(fs, 0, host, 200, 100)};
  for (int ways : {1, 3}) {
    std::exception_ptr e = sw::run_gather_captured(plans, ways, 0);
    ASSERT_NE(e, nullptr);
    EXPECT_THROW(std::rethrow_exception(e), std::system_error);
  }
  EXPECT_EQ(dst[0], 7);
  EXPECT_EQ(dst[299], 7);  // with three lanes the third plan ran on its own lane
}

TEST(TiledGather, ANonePlanIsALogicError) {
  std::vector<sw::CopyPlan> plans(1);
  std::exception_ptr e = sw::run_gather_captured(plans, 1, 0);
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), std::logic_error);
}

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "files/file_storage.hpp"
#include "files/io.hpp"
#include "layout/layout.hpp"
#include "transfer/copy_plan.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using swtest::layout;
using swtest::node;
using sw::CopyEndpoint;
using sw::CopyPlan;
using sw::CopyPlanKind;

namespace {

std::string temp_path(const char* tag) {
  return testing::TempDir() + "sw_copy_plan_" + tag + "_" + std::to_string(::getpid());
}
// A file of n float slots holding values.
void fill_file(sw::FileStorage& f, const std::vector<float>& values) {
  sw::file_write_span(f, 0, values.data(), static_cast<int64_t>(values.size()), 4);
}
std::vector<float> read_file(const sw::FileStorage& f, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  sw::file_read_span(f, 0, out.data(), n, 4);
  return out;
}
int errno_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& err) {
    return err.code().value();
  } catch (...) {
    return -1;
  }
}

}  // namespace

// ------------------------------------------------------------ span plans

TEST(CopyPlanSpan, HostToHostHonoursOffsets) {
  auto src = iota(10);
  std::vector<float> dst(8, -1.0f);
  CopyPlan p = CopyPlan::span(host(src), 3, host(dst), 2, 4);
  ASSERT_EQ(p.kind(), CopyPlanKind::HostToHost);
  EXPECT_TRUE(p.native());
  EXPECT_EQ(p.count(), 4);
  p.run();
  EXPECT_EQ(dst, (std::vector<float>{-1, -1, 4, 5, 6, 7, -1, -1}));
}

TEST(CopyPlanSpan, HostToFileGrowsTheFileAtTheOffset) {
  sw::FileStorage f;
  f.create(temp_path("h2f"));
  auto src = iota(6);
  CopyPlan p = CopyPlan::span(host(src), 1, CopyEndpoint::file_span(f, 4), 2, 4);
  ASSERT_EQ(p.kind(), CopyPlanKind::HostToFile);
  p.run();
  EXPECT_EQ(f.bytes(), 6 * 4);
  EXPECT_EQ(read_file(f, 6), (std::vector<float>{0, 0, 2, 3, 4, 5}));
}

TEST(CopyPlanSpan, FileToHostReadsTheSpan) {
  sw::FileStorage f;
  f.create(temp_path("f2h"));
  fill_file(f, iota(8));
  std::vector<float> dst(5, -1.0f);
  CopyPlan p = CopyPlan::span(CopyEndpoint::file_span(f, 4), 4, host(dst), 1, 3);
  ASSERT_EQ(p.kind(), CopyPlanKind::FileToHost);
  p.run();
  EXPECT_EQ(dst, (std::vector<float>{-1, 5, 6, 7, -1}));
}

TEST(CopyPlanSpan, FileToFileCopiesBetweenOffsets) {
  sw::FileStorage a, b;
  a.create(temp_path("ff_a"));
  b.create(temp_path("ff_b"));
  fill_file(a, iota(6));
  fill_file(b, std::vector<float>(6, -1.0f));
  CopyPlan p = CopyPlan::span(CopyEndpoint::file_span(a, 4), 2, CopyEndpoint::file_span(b, 4), 1, 3);
  ASSERT_EQ(p.kind(), CopyPlanKind::FileToFile);
  p.run();
  EXPECT_EQ(read_file(b, 6), (std::vector<float>{-1, 3, 4, 5, -1, -1}));
}

TEST(CopyPlanSpan, NoNativePlanWithoutTwoNativeEndsOfOneItemSize) {
  auto src = iota(4);
  std::vector<float> dst(4, 0.0f);
  std::vector<double> wide(4, 0.0);
  sw::FileStorage f;
  f.create(temp_path("none"));
  // Item sizes differ.
  EXPECT_EQ(CopyPlan::span(host(src), 0, CopyEndpoint::host_span(wide.data(), 8), 0, 4).kind(),
            CopyPlanKind::None);
  EXPECT_EQ(CopyPlan::span(host(src), 0, CopyEndpoint::file_span(f, 8), 0, 4).kind(), CopyPlanKind::None);
  // Not a native dtype on either side.
  EXPECT_EQ(CopyPlan::span(CopyEndpoint::host_span(src.data(), 0), 0, CopyEndpoint::host_span(dst.data(), 0), 0, 4)
                .kind(),
            CopyPlanKind::None);
  // One side the engine cannot reach (same item size).
  EXPECT_EQ(CopyPlan::span(CopyEndpoint::none(4), 0, host(dst), 0, 4).kind(), CopyPlanKind::None);
  EXPECT_EQ(CopyPlan::span(host(src), 0, CopyEndpoint::none(4), 0, 4).kind(), CopyPlanKind::None);
  EXPECT_FALSE(CopyPlan().native());
}

// ------------------------------------------------------------ logical plans

TEST(CopyPlanLogical, SameHostLayoutLeavesHolesUntouched) {
  // shape (2,3) stride (1,4): slots 0,1,4,5,8,9 addressed; 2,3,6,7 are holes.
  auto l = layout({2, 3}, {1, 4});
  auto src = iota(12);
  std::vector<float> dst(12, -7.0f);
  CopyPlan p = CopyPlan::logical(host(src), 2, l, host(dst), 1, l);
  ASSERT_EQ(p.kind(), CopyPlanKind::HostStrided);
  EXPECT_EQ(p.count(), 6);
  p.run();
  for (int i : {0, 1, 4, 5, 8, 9}) EXPECT_EQ(dst[1 + i], src[2 + i]) << i;
  for (int i : {0, 3, 4, 7, 8, 11}) EXPECT_EQ(dst[i], -7.0f) << i;
}

TEST(CopyPlanLogical, DifferentHostLayoutsRelayout) {
  // Column-major (2,3) into row-major (2,3): same coordinates, new slots.
  auto sl = layout({2, 3}, {1, 2});
  auto dl = layout({2, 3}, {3, 1});
  auto src = iota(6);  // src(i,j) = 1 + i + 2j
  std::vector<float> dst(6, 0.0f);
  CopyPlan p = CopyPlan::logical(host(src), 0, sl, host(dst), 0, dl);
  ASSERT_EQ(p.kind(), CopyPlanKind::HostStrided);
  p.run();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(dst[3 * i + j], 1.0f + i + 2 * j) << i << "," << j;
}

TEST(CopyPlanLogical, BroadcastSourceFillsEveryDestinationCoordinate) {
  // Stride 0 over the second mode: three columns read the same two slots.
  auto sl = layout({2, 3}, {1, 0});
  auto dl = layout({2, 3}, {1, 2});
  std::vector<float> src{0, 10, 20};
  std::vector<float> dst(6, 0.0f);
  CopyPlan::logical(host(src), 1, sl, host(dst), 0, dl).run();
  EXPECT_EQ(dst, (std::vector<float>{10, 20, 10, 20, 10, 20}));
}

TEST(CopyPlanLogical, BroadcastDestinationKeepsTheLastWrite) {
  auto sl = layout({3}, {1});
  auto dl = layout({3}, {0});
  std::vector<float> src{1, 2, 3};
  std::vector<float> dst(2, -1.0f);
  CopyPlan::logical(host(src), 0, sl, host(dst), 1, dl).run();
  EXPECT_EQ(dst, (std::vector<float>{-1, 3}));
}

TEST(CopyPlanLogical, SameBroadcastLayoutCopiesItsCosize) {
  auto l = layout({2, 4}, {1, 0});
  ASSERT_EQ(l.cosize(), 2);
  std::vector<float> src{5, 6};
  std::vector<float> dst(3, 0.0f);
  CopyPlan::logical(host(src), 0, l, host(dst), 1, l).run();
  EXPECT_EQ(dst, (std::vector<float>{0, 5, 6}));
}

TEST(CopyPlanLogical, DifferentLeafCountsHaveNoPlan) {
  auto sl = layout({6}, {1});
  auto dl = layout({2, 3}, {1, 2});
  auto src = iota(6);
  std::vector<float> dst(6, 0.0f);
  EXPECT_EQ(CopyPlan::logical(host(src), 0, sl, host(dst), 0, dl).kind(), CopyPlanKind::None);
}

TEST(CopyPlanLogical, SameLayoutWithAFileCopiesThePhysicalSpanHolesIncluded) {
  auto l = layout({2, 3}, {1, 4});  // cosize 10, holes 2,3,6,7
  ASSERT_EQ(l.cosize(), 10);
  sw::FileStorage f;
  f.create(temp_path("logical_f"));
  auto src = iota(12);
  CopyPlan w = CopyPlan::logical(host(src), 1, l, CopyEndpoint::file_span(f, 4), 0, l);
  ASSERT_EQ(w.kind(), CopyPlanKind::HostToFile);
  EXPECT_EQ(w.count(), 10);
  w.run();
  EXPECT_EQ(read_file(f, 10), iota(10, 2.0f));  // the holes' values travel too
  std::vector<float> back(11, -1.0f);
  CopyPlan r = CopyPlan::logical(CopyEndpoint::file_span(f, 4), 0, l, host(back), 1, l);
  ASSERT_EQ(r.kind(), CopyPlanKind::FileToHost);
  r.run();
  EXPECT_EQ(back[0], -1.0f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(back[1 + i], 2.0f + i) << i;
}

TEST(CopyPlanLogical, BroadcastLayoutToAFileIsItsCosize) {
  auto l = layout({3, 4}, {0, 1});  // cosize 4
  sw::FileStorage a, b;
  a.create(temp_path("bc_a"));
  b.create(temp_path("bc_b"));
  fill_file(a, iota(4));
  CopyPlan p = CopyPlan::logical(CopyEndpoint::file_span(a, 4), 0, l, CopyEndpoint::file_span(b, 4), 0, l);
  ASSERT_EQ(p.kind(), CopyPlanKind::FileToFile);
  EXPECT_EQ(p.count(), 4);
  p.run();
  EXPECT_EQ(read_file(b, 4), iota(4));
}

TEST(CopyPlanLogical, DifferentLayoutsWithAFileHaveNoPlan) {
  sw::FileStorage f;
  f.create(temp_path("logical_none"));
  auto sl = layout({2, 3}, {1, 2});
  auto dl = layout({2, 3}, {3, 1});
  auto src = iota(6);
  EXPECT_EQ(CopyPlan::logical(host(src), 0, sl, CopyEndpoint::file_span(f, 4), 0, dl).kind(), CopyPlanKind::None);
  EXPECT_EQ(CopyPlan::logical(CopyEndpoint::none(4), 0, sl, host(src), 0, sl).kind(), CopyPlanKind::None);
  std::vector<int32_t> ints(6, 0);
  EXPECT_EQ(CopyPlan::logical(host(src), 0, sl, CopyEndpoint::host_span(ints.data(), 2), 0, sl).kind(),
            CopyPlanKind::None);
}

// ------------------------------------------------------------ running

TEST(CopyPlanRun, ShortFileReadIsAnIoError) {
  sw::FileStorage f;
  f.create(temp_path("short"));
  fill_file(f, iota(2));
  std::vector<float> dst(8, 0.0f);
  CopyPlan p = CopyPlan::span(CopyEndpoint::file_span(f, 4), 0, host(dst), 0, 8);
  try {
    p.run();
    FAIL() << "a read past the end of the file must fail";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EIO);
  }
  EXPECT_EQ(errno_of(p.run_captured()), EIO);
}

TEST(CopyPlanRun, ClosedFileIsReportedNotThrownByRunCaptured) {
  sw::FileStorage f;
  f.create(temp_path("closed"));
  fill_file(f, iota(4));
  auto src = iota(4);
  CopyPlan p = CopyPlan::span(host(src), 0, CopyEndpoint::file_span(f, 4), 0, 4);
  f.close_and_unlink();
  EXPECT_THROW(p.run(), std::system_error);
  EXPECT_EQ(errno_of(p.run_captured()), EBADF);
}

TEST(CopyPlanRun, SuccessCapturesNothing) {
  auto src = iota(3);
  std::vector<float> dst(3, 0.0f);
  EXPECT_EQ(CopyPlan::span(host(src), 0, host(dst), 0, 3).run_captured(), nullptr);
  EXPECT_EQ(dst, src);
}

TEST(CopyPlanRun, NonePlanRefusesToRun) {
  CopyPlan p;
  EXPECT_THROW(p.run(), std::logic_error);
  EXPECT_NE(p.run_captured(), nullptr);
}

TEST(CopyPlanKindName, EveryKindHasAName) {
  EXPECT_STREQ(sw::to_string(CopyPlanKind::None), "none");
  EXPECT_STREQ(sw::to_string(CopyPlanKind::HostStrided), "strided host copy");
  EXPECT_STREQ(sw::to_string(CopyPlanKind::FileToFile), "file-to-file span");
}

// ------------------------------------------------------------ pair walk

TEST(IndexPairWalk, VisitsBothLayoutsInColexOrder) {
  auto a = layout({2, 3}, {1, 2});
  auto b = layout({2, 3}, {3, 0});
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::vector<int64_t> ords;
  EXPECT_TRUE(sw::for_each_index_pair(a.leaves(), b.leaves(), [&](int64_t ord, int64_t ai, int64_t bi) {
    ords.push_back(ord);
    seen.emplace_back(ai, bi);
    return true;
  }));
  EXPECT_EQ(ords, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 3}, {2, 0}, {3, 3}, {4, 0}, {5, 3}}));
}

TEST(IndexPairWalk, StopsWhenTheCallbackSaysSo) {
  auto a = layout({4}, {1});
  int calls = 0;
  EXPECT_FALSE(sw::for_each_index_pair(a.leaves(), a.leaves(), [&](int64_t, int64_t, int64_t) {
    return ++calls < 2;
  }));
  EXPECT_EQ(calls, 2);
}

// The value-by-value copy walker skips stride-0 repeats only when both
// sides repeat.
TEST(IndexPairWalk, StrideZeroOnBothSidesIsWalkedOnce) {
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

TEST(IndexPairWalk, StrideZeroOnOneSideIsStillWalked) {
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

TEST(IndexPairWalk, MismatchedExtentsThrow) {
  const std::vector<sw::LeafMode> a = {{4, 1}};
  const std::vector<sw::LeafMode> b = {{3, 1}};
  EXPECT_THROW(sw::for_each_index_pair(a, b, [](int64_t, int64_t, int64_t) { return true; }),
               std::invalid_argument);
}

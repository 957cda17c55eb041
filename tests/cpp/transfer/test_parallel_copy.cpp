// CopyPlan::split and run_parallel_captured: the pieces copy exactly what
// the whole plan copies (offsets, strides, holes), on several threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "layout/layout.hpp"
#include "transfer/copy_plan.hpp"
#include "transfer/parallel_copy.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using swtest::layout;
using sw::CopyEndpoint;
using sw::CopyPlan;
using sw::CopyPlanKind;

namespace {

// The destination a single-threaded run of plan(src -> fresh) produces.
template <class MakePlan>
std::vector<float> reference(std::vector<float>& src, size_t dst_size, MakePlan make) {
  std::vector<float> dst(dst_size, -1.0f);
  make(src, dst).run();
  return dst;
}

}  // namespace

TEST(CopyPlanSplit, SpanPiecesArePageMultiplesCoveringTheSpan) {
  std::vector<float> src = iota(10000), dst(10010, -1.0f);
  CopyPlan p = CopyPlan::span(host(src), 3, host(dst), 7, 9990);
  std::vector<CopyPlan> pieces = p.split(3, 0);
  ASSERT_EQ(pieces.size(), 3u);
  int64_t total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].kind(), CopyPlanKind::HostToHost);
    if (i + 1 < pieces.size()) {
      EXPECT_EQ(pieces[i].count() % 1024, 0);  // 4 KiB of Float32
    }
    total += pieces[i].count();
    pieces[i].run();
  }
  EXPECT_EQ(total, 9990);
  EXPECT_EQ(dst, reference(src, dst.size(), [](auto& s, auto& d) {
              return CopyPlan::span(host(s), 3, host(d), 7, 9990);
            }));
}

TEST(CopyPlanSplit, MinBytesLimitsThePieces) {
  std::vector<float> src = iota(4096), dst(4096);
  CopyPlan p = CopyPlan::span(host(src), 0, host(dst), 0, 4096);  // 16 KiB
  EXPECT_EQ(p.split(8, 8192).size(), 2u);
  EXPECT_EQ(p.split(8, 16384).size(), 1u);
  EXPECT_EQ(p.split(1, 0).size(), 1u);
}

TEST(CopyPlanSplit, StridedPiecesCutTheLongestModeWithHolesAndOffsets) {
  const sw::Layout l = layout({7, 300, 5}, {1, 11, 3400});  // holes between every row
  const size_t n = 5 + static_cast<size_t>(l.cosize());
  std::vector<float> src = iota(n), dst(n, -1.0f);
  CopyPlan p = CopyPlan::logical(host(src), 5, l, host(dst), 2, l);
  std::vector<CopyPlan> pieces = p.split(4, 0);
  ASSERT_EQ(pieces.size(), 4u);
  int64_t total = 0;
  for (auto& piece : pieces) {
    total += piece.count();
    piece.run();
  }
  EXPECT_EQ(total, 7 * 300 * 5);
  EXPECT_EQ(dst, reference(src, n, [&](auto& s, auto& d) { return CopyPlan::logical(host(s), 5, l, host(d), 2, l); }));
}

TEST(CopyPlanSplit, DifferentLayoutsAndFilesAreNotCut) {
  const sw::Layout a = layout({64, 64}, {1, 64});
  const sw::Layout b = layout({64, 64}, {64, 1});
  std::vector<float> src = iota(4096), dst(4096);
  EXPECT_EQ(CopyPlan::logical(host(src), 0, a, host(dst), 0, b).split(4, 0).size(), 1u);
  EXPECT_EQ(CopyPlan().split(4, 0).size(), 1u);
}

TEST(ParallelCopy, RunsEveryPieceAndMatchesTheSerialCopy) {
  const sw::Layout l = layout({1000, 300}, {301, 1});
  const size_t n = 9 + static_cast<size_t>(l.cosize());
  std::vector<float> src = iota(n), dst(n, -1.0f);
  CopyPlan p = CopyPlan::logical(host(src), 9, l, host(dst), 0, l);
  EXPECT_EQ(sw::run_parallel_captured(p, 4, 1), nullptr);
  EXPECT_EQ(dst, reference(src, n, [&](auto& s, auto& d) { return CopyPlan::logical(host(s), 9, l, host(d), 0, l); }));

  std::vector<float> big = iota(1 << 20), out(1 << 20, 0.0f);
  EXPECT_EQ(sw::run_parallel_captured(CopyPlan::span(host(big), 0, host(out), 0, 1 << 20), 2, 4096), nullptr);
  EXPECT_EQ(out, big);
}

TEST(ParallelCopy, ReportsWhatThePlanThrows) {
  std::exception_ptr e = sw::run_parallel_captured(CopyPlan(), 4, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), std::logic_error);
}

// CopyPlan::logical between two host buffers of the same dense layout (one
// that packs [0, size) without gaps or overlap, in any mode order) is the
// span copy of that range; every other layout keeps the strided plan.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "layout/layout.hpp"
#include "transfer/copy_plan.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using swtest::layout;
using sw::CopyEndpoint;
using sw::CopyPlan;
using sw::CopyPlanKind;

TEST(CopyPlanDense, DenseLayoutsInAnyModeOrderAreOneSpan) {
  for (const sw::Layout& l : {layout({6}, {1}), layout({2, 3}, {3, 1}), layout({2, 3}, {1, 2}),
                              layout({1, 4, 1, 2}, {9, 2, 5, 1}), layout({2, 2, 2}, {4, 1, 2})}) {
    auto src = iota(20);
    std::vector<float> dst(20, -1.0f);
    CopyPlan p = CopyPlan::logical(host(src), 3, l, host(dst), 5, l);
    ASSERT_EQ(p.kind(), CopyPlanKind::HostToHost);
    EXPECT_EQ(p.count(), l.size());
    p.run();
    for (int64_t i = 0; i < 20; ++i) {
      const bool inside = i >= 5 && i < 5 + l.size();
      EXPECT_EQ(dst[i], inside ? src[3 + i - 5] : -1.0f) << i;
    }
  }
}

TEST(CopyPlanDense, HolesOverlapsAndRelayoutsStayStrided) {
  auto src = iota(32);
  std::vector<float> dst(32, 0.0f);
  // Holes (stride 2), a gap between modes, a broadcast (stride 0), two modes
  // on one stride, and different layouts on the two sides.
  for (const sw::Layout& l : {layout({4}, {2}), layout({2, 3}, {1, 4}), layout({2, 3}, {1, 0}), layout({2, 2}, {1, 1})})
    EXPECT_EQ(CopyPlan::logical(host(src), 0, l, host(dst), 0, l).kind(), CopyPlanKind::HostStrided);
  EXPECT_EQ(CopyPlan::logical(host(src), 0, layout({2, 3}, {3, 1}), host(dst), 0, layout({2, 3}, {1, 2})).kind(),
            CopyPlanKind::HostStrided);
}

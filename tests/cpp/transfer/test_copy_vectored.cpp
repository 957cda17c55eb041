// run_independent / vectored_groups: spans between host memory and a file
// whose file ranges continue each other go as one preadv / pwritev.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "files/file_storage.hpp"
#include "files/io.hpp"
#include "transfer/copy_plan.hpp"
#include "builders.hpp"

using swtest::host;
using swtest::iota;
using sw::CopyEndpoint;
using sw::CopyPlan;

namespace {

std::string temp_path(const char* tag) {
  return testing::TempDir() + "sw_copy_vectored_" + tag + "_" + std::to_string(::getpid());
}

struct File {
  sw::FileStorage f;
  explicit File(const char* tag, int64_t slots) {
    f.create(temp_path(tag));
    std::vector<float> v = iota(static_cast<size_t>(slots), 0.0f);
    sw::file_write_span(f, 0, v.data(), slots, 4);
  }
  CopyEndpoint end() { return CopyEndpoint::file_span(f, 4); }
  std::vector<float> all() const {
    std::vector<float> out(static_cast<size_t>(f.bytes() / 4));
    sw::file_read_span(f, 0, out.data(), static_cast<int64_t>(out.size()), 4);
    return out;
  }
};

std::vector<const CopyPlan*> ptrs(const std::vector<CopyPlan>& plans) {
  std::vector<const CopyPlan*> out;
  for (const CopyPlan& p : plans) out.push_back(&p);
  return out;
}

}  // namespace

TEST(VectoredGroups, SpansThatContinueInTheFileGroupInFileOrder) {
  File a("groups_a", 32), b("groups_b", 32);
  std::vector<float> h(64);
  std::vector<CopyPlan> plans = {
      CopyPlan::span(a.end(), 4, host(h), 0, 4),     // 0: a[4, 8)
      CopyPlan::span(a.end(), 0, host(h), 20, 4),    // 1: a[0, 4)
      CopyPlan::span(a.end(), 12, host(h), 30, 2),   // 2: a[12, 14) leaves a gap
      CopyPlan::span(host(h), 40, a.end(), 8, 4),    // 3: a write: its own group
      CopyPlan::span(b.end(), 8, host(h), 50, 4),    // 4: another file
      CopyPlan::span(host(h), 0, host(h), 60, 4),    // 5: host to host: in no group
  };
  const auto groups = sw::vectored_groups(ptrs(plans));
  const std::vector<std::vector<size_t>> want = {{1, 0}, {2}, {3}, {4}};
  // Files sort by address; compare as a set of groups.
  ASSERT_EQ(groups.size(), want.size());
  for (const auto& w : want) EXPECT_NE(std::find(groups.begin(), groups.end(), w), groups.end());
}

TEST(VectoredGroups, RunIndependentReadsEveryRunIntoItsBuffer) {
  // 3000 runs of 3 slots, contiguous in the file (more pieces than one
  // preadv takes), each into its own buffer, given in reverse order.
  const int runs = 3000;
  File a("read", runs * 3);
  std::vector<std::vector<float>> bufs(runs, std::vector<float>(3, -1.0f));
  std::vector<CopyPlan> plans;
  for (int r = runs - 1; r >= 0; --r) plans.push_back(CopyPlan::span(a.end(), r * 3, host(bufs[r]), 0, 3));
  ASSERT_EQ(sw::vectored_groups(ptrs(plans)).size(), 1u);
  sw::run_independent(ptrs(plans));
  for (int r = 0; r < runs; ++r)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(bufs[r][k], float(r * 3 + k));
}

TEST(VectoredGroups, RunIndependentWritesEveryRunAndGrowsTheFile) {
  File a("write", 4);
  std::vector<float> h = {10, 11, 12, 13, 14, 15, 16, 17};
  std::vector<CopyPlan> plans = {
      CopyPlan::span(host(h), 4, a.end(), 6, 4),  // [6, 10): past the end
      CopyPlan::span(host(h), 0, a.end(), 2, 4),  // [2, 6)
      CopyPlan::span(host(h), 0, host(h), 0, 0),  // alone
  };
  sw::run_independent(ptrs(plans));
  EXPECT_EQ(a.all(), (std::vector<float>{0, 1, 10, 11, 12, 13, 14, 15, 16, 17}));
}

TEST(VectoredGroups, AGroupPastTheEndOfTheFileIsAShortRead) {
  File a("short", 8);
  std::vector<float> h(16);
  std::vector<CopyPlan> plans = {CopyPlan::span(a.end(), 0, host(h), 0, 4), CopyPlan::span(a.end(), 4, host(h), 8, 8)};
  try {
    sw::run_independent(ptrs(plans));
    FAIL() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EIO);
  }
}

TEST(VectoredGroups, ReadPiecesSkipsEmptyPieces) {
  File a("pieces", 6);
  float x[2] = {-1, -1}, y[4] = {-1, -1, -1, -1};
  ::iovec iov[4] = {{nullptr, 0}, {x, 8}, {nullptr, 0}, {y, 16}};
  a.f.read_pieces(0, iov, 4);
  EXPECT_EQ(x[1], 1.0f);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[3], 5.0f);
}

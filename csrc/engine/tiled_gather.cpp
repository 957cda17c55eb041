// Span copies of one tiled request as one call (see tiled_gather.hpp).
#include "tiled_gather.hpp"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <utility>

#include "executor.hpp"

namespace sw {

std::vector<std::vector<size_t>> gather_lanes(const std::vector<int64_t>& bytes, int ways, int64_t min_lane_bytes) {
  const int64_t total = std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
  int64_t n = std::max(1, ways);
  n = std::min<int64_t>(n, static_cast<int64_t>(bytes.size()));
  if (min_lane_bytes > 0) n = std::min<int64_t>(n, total / min_lane_bytes);
  n = std::max<int64_t>(n, 1);
  std::vector<std::vector<size_t>> lanes(static_cast<size_t>(n));
  std::vector<int64_t> load(lanes.size(), 0);
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first to the lightest lane (ties: the lower index, so equal
  // plans go round-robin), then each lane back in request order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  for (size_t i : order) {
    const size_t lane = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    lanes[lane].push_back(i);
    load[lane] += bytes[i];
  }
  for (auto& lane : lanes) std::sort(lane.begin(), lane.end());
  return lanes;
}

namespace {

// The lanes handed to workers report here; the caller waits for all of them
// (they hold raw pointers into storage the caller keeps alive).
struct Join {
  std::mutex m;
  std::condition_variable cv;
  size_t left = 0;
  std::exception_ptr failure;

  void finished(std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(m);
    if (e && !failure) failure = std::move(e);
    if (--left == 0) cv.notify_all();
  }
};

std::exception_ptr run_lane(const std::vector<CopyPlan>& plans, const std::vector<size_t>& lane) noexcept {
  for (size_t i : lane)
    if (std::exception_ptr e = plans[i].run_captured()) return e;
  return nullptr;
}

}  // namespace

std::exception_ptr run_gather_captured(const std::vector<CopyPlan>& plans, int ways, int64_t min_lane_bytes) noexcept {
  try {
    if (ways <= 0) ways = static_cast<int>(executor_core_threads());
    std::vector<int64_t> bytes;
    bytes.reserve(plans.size());
    for (const CopyPlan& p : plans) bytes.push_back(p.bytes());
    const std::vector<std::vector<size_t>> lanes = gather_lanes(bytes, ways, min_lane_bytes);
    if (lanes.size() < 2) return run_lane(plans, lanes[0]);
    // Every allocation before the first hand-over: from there on nothing
    // but submit() can throw, and a lane it refuses runs here.
    auto join = std::make_shared<Join>();
    join->left = lanes.size() - 1;
    for (size_t l = 1; l < lanes.size(); ++l) {
      const std::vector<size_t>* lane = &lanes[l];
      try {
        submit([join, &plans, lane] { join->finished(run_lane(plans, *lane)); });
      } catch (...) {
        join->finished(run_lane(plans, *lane));  // no worker: run it here
      }
    }
    std::exception_ptr mine = run_lane(plans, lanes[0]);
    std::unique_lock<std::mutex> lk(join->m);
    join->cv.wait(lk, [&] { return join->left == 0; });
    return mine ? mine : join->failure;
  } catch (...) {
    // Only the bookkeeping allocations get here, before any lane was handed
    // over.
    return std::current_exception();
  }
}

}  // namespace sw

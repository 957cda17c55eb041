// Running one copy plan on several threads (see parallel_copy.hpp).
#include "transfer/parallel_copy.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "executor.hpp"

namespace sw {

namespace {

// The pieces handed to workers report here; the caller waits for all of
// them (they hold raw pointers into storage the caller keeps alive).
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

}  // namespace

std::exception_ptr run_parallel_captured(const CopyPlan& plan, int ways, int64_t min_piece_bytes) noexcept {
  try {
    if (ways <= 0) ways = static_cast<int>(executor_core_threads());
    if (ways < 2 || plan.bytes() < 2 * min_piece_bytes) return plan.run_captured();
    std::vector<CopyPlan> pieces = plan.split(ways, min_piece_bytes);
    if (pieces.size() < 2) return plan.run_captured();
    // Every allocation before the first hand-over: from there on nothing
    // but submit() can throw, and a piece it refuses runs here.
    auto join = std::make_shared<Join>();
    join->left = pieces.size() - 1;
    std::vector<std::shared_ptr<CopyPlan>> handed;
    handed.reserve(pieces.size() - 1);
    for (size_t i = 1; i < pieces.size(); ++i) handed.push_back(std::make_shared<CopyPlan>(std::move(pieces[i])));
    for (auto& piece : handed) {
      try {
        submit([join, piece] { join->finished(piece->run_captured()); });
      } catch (...) {
        join->finished(piece->run_captured());  // no worker: run it here
      }
    }
    std::exception_ptr mine = pieces[0].run_captured();
    std::unique_lock<std::mutex> lk(join->m);
    join->cv.wait(lk, [&] { return join->left == 0; });
    return mine ? mine : join->failure;
  } catch (...) {
    // Only the bookkeeping allocations get here, before any piece was handed
    // over.
    return std::current_exception();
  }
}

}  // namespace sw

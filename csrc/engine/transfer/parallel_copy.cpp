// Running one copy plan on several threads (see parallel_copy.hpp).
#include "transfer/parallel_copy.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "executor.hpp"

namespace sw {

namespace {

// The chunks and who has finished them. Shared with the helper jobs, which
// may start after the caller returned: a helper that finds no chunk left
// touches nothing but this block (the chunks hold raw pointers into storage
// the caller keeps alive only until every claimed chunk has finished).
struct Chunks {
  std::vector<CopyPlan> plans;
  std::atomic<size_t> next{0};
  std::mutex m;
  std::condition_variable cv;
  size_t finished = 0;  // guarded by m
  std::exception_ptr failure;

  // Claims and runs chunks until none is left.
  void drain() noexcept {
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= plans.size()) return;
      std::exception_ptr e = plans[i].run_captured();
      std::lock_guard<std::mutex> lk(m);
      if (e && !failure) failure = std::move(e);
      if (++finished == plans.size()) cv.notify_all();
    }
  }
};

}  // namespace

std::exception_ptr run_parallel_captured(const CopyPlan& plan, int ways, int64_t min_piece_bytes) noexcept {
  try {
    if (ways <= 0) ways = static_cast<int>(executor_core_threads());
    min_piece_bytes = std::max<int64_t>(min_piece_bytes, 1);
    if (ways < 2 || plan.bytes() < 2 * min_piece_bytes) return plan.run_captured();
    auto chunks = std::make_shared<Chunks>();
    const int64_t wanted = std::max<int64_t>(int64_t(ways) * kChunksPerWay, plan.bytes() / kMaxParallelChunkBytes);
    chunks->plans = plan.split(static_cast<int>(std::min<int64_t>(wanted, 1 << 16)), min_piece_bytes);
    if (chunks->plans.size() < 2) return plan.run_captured();
    // Helpers beyond the chunk count would find nothing to do.
    const int helpers = static_cast<int>(std::min<size_t>(static_cast<size_t>(ways - 1), chunks->plans.size() - 1));
    for (int k = 0; k < helpers; ++k) {
      try {
        submit([chunks] { chunks->drain(); });
      } catch (...) {
        break;  // no worker: this thread copies what nobody claims
      }
    }
    chunks->drain();
    std::unique_lock<std::mutex> lk(chunks->m);
    chunks->cv.wait(lk, [&] { return chunks->finished == chunks->plans.size(); });
    return chunks->failure;
  } catch (...) {
    // Only the bookkeeping allocations get here, before any chunk was
    // handed over.
    return std::current_exception();
  }
}

}  // namespace sw

// Running one copy plan on several threads (see parallel_copy.hpp).
#include "transfer/parallel_copy.hpp"

#include <algorithm>
#include <exception>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/pieces.hpp"

namespace sw {

std::exception_ptr run_parallel_captured(const CopyPlan& plan, int ways, int64_t min_piece_bytes) noexcept {
  try {
    if (ways <= 0) ways = static_cast<int>(executor_core_threads());
    min_piece_bytes = std::max<int64_t>(min_piece_bytes, 1);
    if (ways < 2 || plan.bytes() < 2 * min_piece_bytes) return plan.run_captured();
    const int64_t wanted = std::max<int64_t>(int64_t(ways) * kChunksPerWay, plan.bytes() / kMaxParallelChunkBytes);
    const std::vector<CopyPlan> chunks = plan.split(static_cast<int>(std::min<int64_t>(wanted, 1 << 16)), min_piece_bytes);
    if (chunks.size() < 2) return plan.run_captured();
    // The chunks are claimed in order by this thread and the piece helpers
    // (run_pieces); the first failure in chunk order is reported.
    std::vector<std::exception_ptr> failures(chunks.size());
    run_pieces(chunks.size(), [&](size_t i) { failures[i] = chunks[i].run_captured(); }, ways);
    for (std::exception_ptr& e : failures)
      if (e) return e;
    return nullptr;
  } catch (...) {
    // Only the bookkeeping allocations get here, before any chunk was
    // handed over.
    return std::current_exception();
  }
}

}  // namespace sw

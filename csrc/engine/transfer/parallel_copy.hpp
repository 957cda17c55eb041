// Running one copy plan on several threads: the calling thread runs one
// piece and the executor's workers the others (CopyPlan::split decides the
// pieces), so a large host copy uses every core the pool keeps.
#pragma once
#include <cstdint>
#include <exception>

#include "transfer/copy_plan.hpp"

namespace sw {

// Below this many bytes a piece costs more to hand over (a worker must be
// scheduled, which on a busy machine takes milliseconds) than it saves.
constexpr int64_t kMinParallelPieceBytes = int64_t(16) << 20;

// Runs plan split into at most `ways` pieces (<= 0: the executor's core
// thread count) of at least min_piece_bytes, and returns once every piece
// has finished: what the first failing piece threw, or null. Never throws;
// a piece that cannot be handed to a worker runs on this thread.
std::exception_ptr run_parallel_captured(const CopyPlan& plan, int ways = 0,
                                         int64_t min_piece_bytes = kMinParallelPieceBytes) noexcept;

}  // namespace sw

// Running one copy plan on several threads: the plan is cut into chunks
// (CopyPlan::split decides the cuts) that the calling thread and the piece
// helpers (runtime/pieces.hpp) claim one at a time, so a large host copy
// uses every core the executor keeps, and a helper that starts late (busy
// machine) only takes what is left instead of holding the caller up.
#pragma once
#include <cstdint>
#include <exception>

#include "transfer/copy_plan.hpp"

namespace sw {

// Chunks are at least this large: a smaller one costs more in hand-over and
// cache misses on the shared counter than a second core saves, and every
// chunk boundary may split a transparent huge page between two threads.
constexpr int64_t kMinParallelPieceBytes = int64_t(4) << 20;
// Chunks per participating thread: enough that a thread that starts late or
// runs slow (a shared core) leaves its share to the others.
constexpr int kChunksPerWay = 4;
// ... and at most this large, so the last chunks even out the threads.
constexpr int64_t kMaxParallelChunkBytes = int64_t(8) << 20;

// Runs plan on up to `ways` threads (<= 0: the executor's core thread
// count): this thread plus ways - 1 piece helpers, in chunks of at least
// min_piece_bytes claimed in order. Plans under two chunks, or ways < 2, run
// on this thread alone. Returns once every chunk has finished: what the
// first failing chunk threw, or null. Never throws; when no helper can be
// started this thread copies everything.
std::exception_ptr run_parallel_captured(const CopyPlan& plan, int ways = 0,
                                         int64_t min_piece_bytes = kMinParallelPieceBytes) noexcept;

}  // namespace sw

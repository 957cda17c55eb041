// Running the span copies of one TiledEvictable request (the selected
// tiles of a projection, the transfers of a residency request) as one
// call: the plans are dealt to a few lanes balanced by bytes, the calling
// thread runs one lane and the executor's workers the others, so the page
// faults of a fresh destination and the reads of the file are spread over
// the cores, and the request pays one hand-off instead of one per tile.
#pragma once
#include <cstdint>
#include <exception>
#include <vector>

#include "transfer/copy_plan.hpp"

namespace sw {

// Below this many bytes a lane is not worth a worker (see parallel_copy.hpp:
// a worker that must be scheduled costs far more than a small copy).
constexpr int64_t kMinGatherLaneBytes = int64_t(4) << 20;

// Deals plans of the given byte sizes to at most `ways` lanes (at least
// one), each lane of at least min_lane_bytes when there are several: the
// largest plan first to the lightest lane. Within a lane the plans keep
// their order. Returns the plan indices per lane; every index occurs once.
std::vector<std::vector<size_t>> gather_lanes(const std::vector<int64_t>& bytes, int ways,
                                              int64_t min_lane_bytes = kMinGatherLaneBytes);

// Runs every plan (native span or strided plans; the caller keeps their
// endpoints alive and unchanged until this returns) on up to `ways` lanes
// (<= 0: the executor's core thread count) and returns once all have
// finished: what the first failing plan threw (a lane stops at its first
// failure), or null. Never throws; a lane no worker takes runs here.
std::exception_ptr run_gather_captured(const std::vector<CopyPlan>& plans, int ways = 0,
                                       int64_t min_lane_bytes = kMinGatherLaneBytes) noexcept;

}  // namespace sw

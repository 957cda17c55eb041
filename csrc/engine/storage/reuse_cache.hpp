// The reuse cache of freed heap buffers.
//
// Recently freed heap buffers are kept for the next allocation of the same
// padded size: a move frees its source and the next one allocates a
// destination of that size, and a loop drops one step's result before the
// next step allocates its own, which then needs no fresh pages (on a VM a
// 4 KiB page fault costs about a microsecond: 256 of them per MiB, and the
// kernel zeroes every fresh page). glibc reuses such chunks too, but trims
// the heap top or maps each chunk afresh depending on the order of frees.
//
// Two bounded caches, the oldest buffers going first: buffers of
// kReuseMinBytes up to kReuseCacheBytes, up to kReuseCacheBytes in all, and
// larger heap buffers (below kMappedThreshold: a tiled projection's 16 MiB
// result, say) up to kReuseLargeBytes in all; so at most kReuseCacheBytes +
// kReuseLargeBytes of freed memory stay resident. Only buffers with no
// export outstanding come here. Disabled under ASan, whose quarantine must
// see every free.
#pragma once
#include <cstddef>

namespace sw {

constexpr size_t kReuseMinBytes = size_t(128) << 10;
constexpr size_t kReuseCacheBytes = size_t(8) << 20;
constexpr size_t kReuseLargeBytes = size_t(32) << 20;

// A cached block (storage/heap.hpp) of exactly padded bytes, or null.
void* reuse_take(size_t padded) noexcept;
// Keeps a heap block of padded bytes for the next allocation of its size;
// false when it does not fit (the caller frees it).
bool reuse_put(void* data, size_t padded) noexcept;

}  // namespace sw

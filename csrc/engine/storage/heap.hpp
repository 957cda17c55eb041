// Aligned heap blocks: the host buffers below the mapping threshold
// (storage/aligned_buffer.hpp) and the blocks the reuse cache keeps.
#pragma once
#include <cstddef>

namespace sw {

// A block of bytes at a kStorageAlignment-aligned address, zero-filled when
// zero is true. Throws std::bad_alloc.
void* heap_aligned(size_t bytes, bool zero);
// Frees a block of heap_aligned.
void heap_free(void* data) noexcept;

}  // namespace sw

// Aligned heap blocks (storage/heap.hpp).
#include "storage/heap.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>

#include "storage/aligned_buffer.hpp"

namespace sw {

// Heap buffers come from plain malloc, over-allocated by one alignment unit
// and aligned up; the byte before the aligned address keeps the distance
// back (1..64). Plain malloc chunks are reused exactly when a buffer of the
// same size is freed and allocated again (a move frees its source and the
// next one allocates its destination), where memalign's split chunks were
// not: every move then faulted in fresh heap pages.
// Zeroed buffers come from calloc, which skips the memset for memory fresh
// from the kernel (as np.zeros does).
void* heap_aligned(size_t bytes, bool zero) {
  auto* raw = static_cast<unsigned char*>(zero ? std::calloc(1, bytes + kStorageAlignment)
                                               : std::malloc(bytes + kStorageAlignment));
  if (!raw) throw std::bad_alloc();
  const uintptr_t a = (reinterpret_cast<uintptr_t>(raw) + kStorageAlignment) & ~uintptr_t(kStorageAlignment - 1);
  auto* p = reinterpret_cast<unsigned char*>(a);
  p[-1] = static_cast<unsigned char>(p - raw);
  return p;
}

void heap_free(void* data) noexcept {
  auto* p = static_cast<unsigned char*>(data);
  std::free(p - p[-1]);
}

}  // namespace sw

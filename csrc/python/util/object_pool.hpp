// Freed instances of the exact built-in types that every tensor operation
// makes (Tensor, CPU), kept for reuse the way CPython keeps its float,
// tuple and list freelists. An import, a view or a small move allocates a
// Tensor and often a CPU carrier; going back to the allocator for each was
// a quarter of what strideweave.from_dlpack itself costs (callgrind).
//
// Installed as the type's tp_alloc / tp_free: only objects of exactly the
// pooled type are kept (a subclass has its own size and, made by Python,
// its own allocator); a reused block is zeroed and initialised as
// PyType_GenericAlloc leaves a new one (tracked for a GC type). Callers hold
// the GIL, as for any allocation. Under AddressSanitizer a kept object is
// poisoned until it is reused, so a use after free is still reported.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SW_POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SW_POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SW_POOL_POISON(p, n) ((void)(p), (void)(n))
#define SW_POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace swpy {

struct ObjectPool {
  static constexpr int kCapacity = 16;
  PyObject* items[kCapacity]{};
  int count = 0;
};

// tp_alloc for a pooled type whose basic size is Size: a kept block of
// `pooled` when type is exactly that and one is kept, else
// PyType_GenericAlloc. (Inline, with the size known: this is the whole
// allocation on the common path.)
template <size_t Size>
inline PyObject* pool_alloc(ObjectPool& pool, PyTypeObject* pooled, PyTypeObject* type, Py_ssize_t nitems) {
  if (type != pooled || nitems != 0 || pool.count == 0) return PyType_GenericAlloc(type, nitems);
  PyObject* op = pool.items[--pool.count];
  SW_POOL_UNPOISON(op, Size);
  // As PyType_GenericAlloc: every field zero, then the header.
  std::memset(static_cast<void*>(op), 0, Size);
  PyObject_Init(op, pooled);
  if (PyType_IS_GC(pooled)) PyObject_GC_Track(op);
  return op;
}
// tp_free for a pooled type: keeps an object of exactly `pooled` while
// there is room, else frees it as the type's default tp_free would.
void pool_free(ObjectPool& pool, PyTypeObject* pooled, void* self);

}  // namespace swpy

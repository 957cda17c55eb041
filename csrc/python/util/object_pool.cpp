// Freelists of exact built-in types (see object_pool.hpp).
#include "util/object_pool.hpp"

namespace swpy {

void pool_free(ObjectPool& pool, PyTypeObject* pooled, void* self) {
  auto* op = static_cast<PyObject*>(self);
  // tp_dealloc untracked a GC object already; it stays untracked while kept.
  if (Py_IS_TYPE(op, pooled) && pool.count < ObjectPool::kCapacity) {
    pool.items[pool.count++] = op;
    SW_POOL_POISON(op, static_cast<size_t>(pooled->tp_basicsize));
    return;
  }
  if (PyType_IS_GC(Py_TYPE(op)))
    PyObject_GC_Del(self);
  else
    PyObject_Free(self);
}

}  // namespace swpy

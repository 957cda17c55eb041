// The _core module: type registration and the init function of each type
// family (called by module.cpp in SW_MODULE_INITS order).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy {

// Adds a type to the module under its name (PyType_Ready included).
int add_type(PyObject* module, PyTypeObject* type, const char* name);

// One init function per file, called by module.cpp in this order; each
// readies its types and adds its public names to the module.
#define SW_MODULE_INITS(X) \
  X(dtype) X(shape) X(layout) X(carrier) X(cpu) X(generic) X(file_backed) \
  X(tensor) X(tensor_index) X(constructors) X(representation) X(operation) X(ops) X(ops_view) X(autograd) X(dlpack) X(dlpack_exchange) \
  X(dlpack_import) X(await) X(move) X(evictable) X(metal) X(extension) X(profiler) X(tiled_evictable) X(pickling)
#define SW_DECLARE_INIT(name) int name##_module_init(PyObject* module);
SW_MODULE_INITS(SW_DECLARE_INIT)
#undef SW_DECLARE_INIT

}  // namespace swpy

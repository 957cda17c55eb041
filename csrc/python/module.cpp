// The strideweave._core extension module: creates the module and runs each
// file's init function (see SW_MODULE_INITS in module.hpp).
#include "module.hpp"

namespace swpy {

int add_type(PyObject* module, PyTypeObject* type, const char* name) {
  if (PyType_Ready(type) < 0) return -1;
  Py_INCREF(type);
  if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) < 0) {
    Py_DECREF(type);
    return -1;
  }
  return 0;
}

namespace {
PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "strideweave._core",
    "StrideWeave native core: layouts, carriers, tensors, autograd, DLPack "
    "export and movement.",
    -1, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace

}  // namespace swpy

PyMODINIT_FUNC PyInit__core(void) {
  PyObject* m = PyModule_Create(&swpy::core_module);
  if (!m) return nullptr;
#define SW_CALL_INIT(name) \
  if (swpy::name##_module_init(m) < 0) { Py_DECREF(m); return nullptr; }
  SW_MODULE_INITS(SW_CALL_INIT)
#undef SW_CALL_INIT
  return m;
}

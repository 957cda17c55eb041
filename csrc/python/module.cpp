// The strideweave._core extension module: creates the module and runs each
// file's init function (see SW_MODULE_INITS in module.hpp).
#include "module.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"

namespace swpy {

int add_type(PyObject* module, PyTypeObject* type, const char* name) {
  if (PyType_Ready(type) < 0) return -1;
  return PyModule_AddObjectRef(module, name, reinterpret_cast<PyObject*>(type));
}

int intern_module_names() {
  InternedNames& n = module_state.names;
  struct {
    PyObject** slot;
    const char* text;
  } table[] = {
      {&n.size, "size"},
      {&n.dtype, "dtype"},
      {&n.get_value, "get_value"},
      {&n.set_value, "set_value"},
      {&n.is_mutable, "_is_mutable"},
      {&n.release, "_release"},
      {&n.new_like, "new_like"},
      {&n.allocate_like, "allocate_like"},
      {&n.dlpack_info, "dlpack_info"},
      {&n.mutable_, "mutable"},
      {&n.empty, "empty"},
      {&n.stream, "stream"},
      {&n.max_version, "max_version"},
      {&n.dl_device, "dl_device"},
      {&n.copy, "copy"},
      {&n.pointer, "pointer"},
      {&n.device_type, "device_type"},
      {&n.device_id, "device_id"},
      {&n.dunder_dlpack, "__dlpack__"},
      {&n.dunder_dlpack_exchange_api, "__dlpack_c_exchange_api__"},
  };
  for (auto& e : table) {
    if (*e.slot) continue;  // interned by an earlier import of this process
    *e.slot = PyUnicode_InternFromString(e.text);  // module lifetime
    if (!*e.slot) return -1;
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
  swpy::Ref m = swpy::Ref::steal(PyModule_Create(&swpy::core_module));
  if (!m || swpy::intern_module_names() < 0) return nullptr;
#define SW_CALL_INIT(name) \
  if (swpy::name##_module_init(m.get()) < 0) return nullptr;
  SW_MODULE_INITS(SW_CALL_INIT)
#undef SW_CALL_INIT
  return m.release();
}

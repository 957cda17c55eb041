// Builders for the static tables of the C-API (type objects, slot tables,
// method casts). Aggregate initializers of PyTypeObject and the
// Py*Methods tables name only some of their fields and trip
// -Wmissing-field-initializers (GCC 12 warns on C++20 designated initializers
// too); these value-initialize every field and let the caller fill the ones
// the type uses, so the project builds without silencing that warning.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy {

// A static type object: header, name and basic size set, every other field
// zero until the family's init function fills it before PyType_Ready.
inline PyTypeObject static_type(const char* name, Py_ssize_t basicsize) {
  PyTypeObject t{};
  PyVarObject head = {PyObject_HEAD_INIT(nullptr) 0};
  t.ob_base = head;
  t.tp_name = name;
  t.tp_basicsize = basicsize;
  return t;
}

// PyMethodDef wants a PyCFunction; METH_KEYWORDS / METH_FASTCALL functions have
// other signatures, and CPython calls them by the flag. The detour through
// void(*)(void) is the documented way to silence -Wcast-function-type.
template <class F>
inline PyCFunction method_cast(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f));
}

}  // namespace swpy

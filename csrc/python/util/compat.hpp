// Version shims for the CPython C-API, in one place (in the manner of NumPy's
// pythoncapi_compat.h). No other binding file tests PY_VERSION_HEX.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy::compat {

// True once interpreter finalization has begun (Py_IsFinalizing is public
// from 3.13; earlier versions only have the private spelling).
inline bool is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// True while Python objects may be touched from a foreign thread.
inline bool interpreter_alive() { return Py_IsInitialized() && !is_finalizing(); }

// True when the calling thread holds the GIL right now (its thread state is
// attached), finalization included; false on a thread without one, or once
// the thread state is gone. Never takes the GIL.
inline bool thread_holds_gil() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != nullptr;
#else
  return _PyThreadState_UncheckedGet() != nullptr;
#endif
}

// The pending exception as one object (new reference), cleared; NULL when
// none is pending (PyErr_GetRaisedException from 3.12).
inline PyObject* take_raised() {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (!type) return nullptr;
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
#endif
}

// Makes exc (stolen; may be NULL, then nothing happens) the pending exception.
inline void restore_raised(PyObject* exc) {
  if (!exc) return;
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(exc);
#else
  PyObject* tb = PyException_GetTraceback(exc);
  PyErr_Restore(Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(exc))), exc, tb);
#endif
}

// The attribute name of type (through its MRO) as a borrowed reference,
// or NULL without an exception: a type-level protocol lookup
// (type(x).__dlpack_c_exchange_api__) that costs a method-cache probe and
// never builds an AttributeError. _PyType_Lookup is the spelling from 3.10
// to 3.13 (PyType_Lookup is not public).
inline PyObject* type_lookup(PyTypeObject* type, PyObject* name) { return _PyType_Lookup(type, name); }

}  // namespace swpy::compat

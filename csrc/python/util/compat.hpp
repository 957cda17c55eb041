// Version shims for the CPython C-API, in one place (in the manner of NumPy's
// pythoncapi_compat.h). No other binding file tests PY_VERSION_HEX.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "util/ref.hpp"

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
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != nullptr;  // thread-local from 3.12
#else
  // Before 3.12 the "current" thread state is process-wide: it names the
  // thread that holds the GIL, whichever that is, so it must be this
  // thread's own (a GIL-less thread would otherwise take another thread's
  // hold for its own and touch objects unguarded).
  PyThreadState* holder = _PyThreadState_UncheckedGet();
  return holder != nullptr && holder == PyGILState_GetThisThreadState();
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
  Ref owned_type = Ref::steal(type), owned_tb = Ref::steal(tb);
  if (tb && value) PyException_SetTraceback(value, tb);
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

// Whether type's instances keep their __dict__ where the interpreter
// manages it (3.11+ Python classes) rather than at tp_dictoffset.
inline bool has_managed_dict(PyTypeObject* type) {
#ifdef Py_TPFLAGS_MANAGED_DICT
  return PyType_HasFeature(type, Py_TPFLAGS_MANAGED_DICT);
#else
  (void)type;
  return false;
#endif
}

// Appends note (a str) to exc's PEP 678 notes: BaseException.add_note from
// 3.11; before, the __notes__ list itself (which 3.10 does not display).
// 0 / -1 with an exception set (say a __notes__ that is not a list).
inline int add_note(PyObject* exc, PyObject* note) {
#if PY_VERSION_HEX >= 0x030B0000
  return Ref::steal(PyObject_CallMethod(exc, "add_note", "O", note)) ? 0 : -1;
#else
  Ref notes = Ref::steal(PyObject_GetAttrString(exc, "__notes__"));
  if (!notes) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    notes = Ref::steal(PyList_New(0));
    if (!notes || PyObject_SetAttrString(exc, "__notes__", notes.get()) < 0) return -1;
  }
  const int rc = PyList_Check(notes.get()) ? PyList_Append(notes.get(), note) : -1;
  if (rc < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Cannot add note: __notes__ is not a list");
  return rc;
#endif
}

}  // namespace swpy::compat

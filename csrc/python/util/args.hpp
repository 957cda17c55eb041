// PyArg "O&" converters for sizes, offsets and counts: like the "n" format
// (any index, OverflowError past Py_ssize_t) except that bool is refused
// with TypeError, as Shape refuses it: True is an int subclass, not a size.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>

#include "util/ref.hpp"

namespace swpy {

// Python's bool or NumPy's bool scalar. Keys, indices and sizes refuse both:
// NumPy before 2.3 gives its bool an __index__ (True would read as 1), later
// versions refuse it themselves. Compared by type name: NumPy is never
// imported for this.
inline bool is_bool(PyObject* o) {
  if (PyBool_Check(o)) return true;
  const char* n = Py_TYPE(o)->tp_name;
  return std::strcmp(n, "numpy.bool") == 0 || std::strcmp(n, "numpy.bool_") == 0;
}

inline int ssize_arg(PyObject* o, Py_ssize_t* out, const char* what) {
  if (is_bool(o)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not bool", what);
    return 0;
  }
  Py_ssize_t n = PyNumber_AsSsize_t(o, PyExc_OverflowError);
  if (n == -1 && PyErr_Occurred()) return 0;
  *out = n;
  return 1;
}

// A 64-bit integer (the "L" format) that is not a bool; OverflowError past
// 64 bits.
inline int int64_value(PyObject* o, long long* out, const char* what) {
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(o)->tp_name);
    return 0;
  }
  Ref i = Ref::steal(PyNumber_Index(o));
  if (!i) return 0;
  const long long v = PyLong_AsLongLong(i.get());
  if (v == -1 && PyErr_Occurred()) return 0;
  *out = v;
  return 1;
}

inline int ns_arg(PyObject* o, void* out) { return int64_value(o, static_cast<long long*>(out), "a time in ns"); }

inline int size_arg(PyObject* o, void* out) { return ssize_arg(o, static_cast<Py_ssize_t*>(out), "size"); }

// The size (slot count) of a new carrier of class cls: as size_arg, and a
// size that is not an integer (a list of values, an array) is a TypeError
// that points to strideweave.tensor, which makes a tensor from values.
inline int carrier_size_arg(PyObject* o, Py_ssize_t* out, const char* cls) {
  if (ssize_arg(o, out, "size")) return 1;
  if (!PyErr_ExceptionMatches(PyExc_TypeError) || is_bool(o)) return 0;
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError,
               "%s() size must be an int (the number of slots), not %.100s; to make a tensor from values use "
               "strideweave.tensor(data)",
               cls, Py_TYPE(o)->tp_name);
  return 0;
}
inline int cpu_size_arg(PyObject* o, void* out) { return carrier_size_arg(o, static_cast<Py_ssize_t*>(out), "CPU"); }
inline int metal_size_arg(PyObject* o, void* out) {
  return carrier_size_arg(o, static_cast<Py_ssize_t*>(out), "Metal");
}
inline int offset_arg(PyObject* o, void* out) { return ssize_arg(o, static_cast<Py_ssize_t*>(out), "offset"); }
inline int count_arg(PyObject* o, void* out) { return ssize_arg(o, static_cast<Py_ssize_t*>(out), "count"); }

}  // namespace swpy

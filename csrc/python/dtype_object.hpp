// The DType family (dtype.cpp): DType, CompoundDType and the built-in singletons.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dtype.hpp"

namespace swpy {

struct DTypeObject {
  PyObject_HEAD
  sw::DTypeCode code;
  const char* name;          // static string for built-ins
  PyObject* simple_types;    // tuple of simple DType for compound; else NULL
};
extern PyTypeObject DType_Type;
extern PyTypeObject CompoundDType_Type;
bool is_dtype(PyObject* o);
// Borrowed reference to the built-in singleton.
PyObject* dtype_singleton(sw::DTypeCode code);
inline sw::DTypeCode dtype_code(PyObject* d) { return reinterpret_cast<DTypeObject*>(d)->code; }
// True for Float32, Float64 and Floating (differentiable dtypes).
bool dtype_is_differentiable(PyObject* d);

}  // namespace swpy

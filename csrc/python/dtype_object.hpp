// The DType family (dtype.cpp): DType, CompoundDType and the built-in singletons.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dtype/dtype.hpp"

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
// The DType a dtype= argument names: a DType itself, or a NumPy dtype or
// scalar type (np.float32, np.dtype("int32")) by its NumPy name, found
// without importing NumPy. 1 with *out set (borrowed), 0 when arg is
// neither (no exception: the caller raises its TypeError), -1 with
// ValueError for a NumPy dtype StrideWeave has no DType for.
int dtype_resolve(PyObject* arg, PyObject** out);

}  // namespace swpy

// The Tensor family: the Tensor object (tensor.cpp) and the Tensor methods
// other files implement (DLPack export, dlpack.cpp).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dtype.hpp"
#include "layout_object.hpp"

namespace swpy {

struct TensorObject {
  PyObject_HEAD
  PyObject* weakreflist;
  PyObject* carrier;
  Py_ssize_t offset;
  PyObject* layout;
  PyObject* dtype;           // logical dtype
  PyObject* representation;  // TensorRepresentation for multi-subtensor; else NULL
  PyObject* autograd_ctx;    // Operation or NULL
  PyObject* grad;            // Tensor or NULL
  bool retains_grad;
};
extern PyTypeObject Tensor_Type;
inline bool is_tensor(PyObject* o) { return PyObject_TypeCheck(o, &Tensor_Type); }
inline TensorObject* as_tensor(PyObject* o) { return reinterpret_cast<TensorObject*>(o); }
// Validating constructor (same checks as Tensor(...)).
PyObject* tensor_new(PyObject* carrier, Py_ssize_t offset, PyObject* layout);
// A Tensor at offset 0 over a built-in carrier the caller has just made
// (no Python hooks) whose dtype is dtype and whose slots cover layout's
// cosize: nothing is checked (strideweave.from_dlpack's results).
PyObject* tensor_over_native(PyObject* carrier, PyObject* layout, sw::DTypeCode dtype);
// True for a multi-subtensor tensor.
inline bool tensor_is_multi(PyObject* t) { return as_tensor(t)->representation != nullptr; }
// Raises NotImplementedError("Multi-subtensor Tensor <reason> is not
// implemented ...") and returns -1 for a multi-subtensor tensor; else 0.
int tensor_reject_multi(PyObject* t, const char* reason);


// DLPack export (dlpack.cpp).
PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kwargs);
// Same method for a METH_FASTCALL | METH_KEYWORDS table entry: skips the
// kwargs dict CPython builds for METH_VARARGS, which dominates export cost.
PyObject* tensor_dlpack_fastcall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused);

}  // namespace swpy

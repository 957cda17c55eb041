// Values in and out of tensors without a Python loop (API.md section 11):
// strideweave.tensor(), Tensor.tolist(), Tensor.item(), Tensor.__array__().
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "module.hpp"

namespace swpy {

// Adds strideweave.tensor to the module (called from tensor_module_init).
int tensor_data_module_init(PyObject* module);

// Tensor methods (tensor.cpp's method table).
PyObject* tensor_tolist(PyObject* self, PyObject* unused);
PyObject* tensor_item(PyObject* self, PyObject* unused);
PyObject* tensor_array(PyObject* self, PyObject* args, PyObject* kwargs);
// Tensor.numpy(): np.asarray(t) (a view for CPU Float32/Int32, else a copy).
PyObject* tensor_numpy(PyObject* self, PyObject* unused);

}  // namespace swpy

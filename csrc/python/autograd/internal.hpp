// Helpers private to the autograd family's files (not for other families).
#pragma once
#include "module.hpp"
#include "util/errors.hpp"

namespace swpy::autograd {

// Readies no_grad and adds is_grad_enabled / set_grad_enabled (grad_mode.cpp;
// operation_module_init calls it after readying Operation).
int grad_mode_module_init(PyObject* module);

// A dtype's name for messages ("Float32", or the class of a compound dtype).
const char* dtype_label(PyObject* dtype);
// True for a Tensor of a differentiable dtype (Float32, Float64, Floating).
bool differentiable(PyObject* tensor);
// Borrowed Shape object of a Tensor's layout.
PyObject* shape_obj(PyObject* tensor);

}  // namespace swpy::autograd

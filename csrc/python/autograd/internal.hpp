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

// Says who failed (who + what: "add(): ", "relu backward: ", ...) for an
// exception raised deeper down (locate_error): the library's own errors read
// "add(): <message>"; anything user code raised stays the same object with
// the note "in add()". Two parts so callers need not format a prefix on the
// success path. Returns -1.
int add_error_context(const char* who, const char* what = "");

// Runs engine code f(); whatever it throws becomes the matching Python
// exception (raise_engine_exception) with who + what put before its message
// (MemoryError is left as it is). 0 / -1.
template <class F>
int engine_call_in(const char* who, const char* what, F&& f) {
  try {
    f();
    return 0;
  } catch (...) {
    raise_engine_exception();
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    return add_error_context(who, what);
  }
}

}  // namespace swpy::autograd

// The autograd family (csrc/python/autograd/): Operation, grad mode,
// Tensor.backward and the differentiable operations. These are the
// declarations other type families call; everything is called with the GIL
// held and follows the house conventions (new reference or NULL with an
// exception; 0 / -1).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dtype/dtype.hpp"
#include "layout/algebra.hpp"
#include "layout/layout.hpp"

namespace swpy {

// Thread-local grad mode (grad_mode.cpp); util/scopes.hpp's GradMode and
// NoGrad scopes are built on these two.
bool grad_enabled();
void set_grad_enabled(bool on);

// Operation (operation.cpp): the open base of every recorded autograd node.
struct OperationObject {
  PyObject_HEAD
  PyObject* dict;
  PyObject* weakreflist;
  PyObject* inputs;     // tuple of saved Tensor inputs, or NULL
  PyObject* versions;   // tuple of version tokens, or NULL
  bool graph_freed;     // a backward pass without retain_graph freed it
};
extern PyTypeObject Operation_Type;
inline bool is_operation(PyObject* o) { return PyObject_TypeCheck(o, &Operation_Type); }
// Operation.forward(*args) as the base implements it: runs _forward, records
// the profiler event and, in grad mode with a differentiable Tensor input,
// saves the inputs and sets result.autograd_ctx. args is a tuple.
PyObject* operation_forward(PyObject* op, PyObject* args);

// Gradient layout rule (sw::gradient_layout): a tensor's own layout when
// injective, else the compact layout of its shape. Throws what the engine
// throws (std::bad_alloc); callers catch it.
inline sw::Layout grad_layout_for(const sw::Layout& l) { return sw::gradient_layout(l); }
// Checks the cotangent layout contract for gradient g of tensor target
// (TypeError: not a Tensor or not differentiable; RuntimeError: released;
// ValueError: shape/layout). 0 / -1. backward.cpp.
int autograd_check_cotangent(PyObject* target, PyObject* g);
// Tensor.backward(gradient=None, retain_graph=False). backward.cpp.
PyObject* tensor_backward(PyObject* self, PyObject* args, PyObject* kwargs);

// Fresh host storage of n slots of dtype in like's exact class (CPU, or its
// allocate_like for subclasses); *data receives its host pointer. ops.cpp.
PyObject* ops_alloc_host(PyObject* like, Py_ssize_t n, sw::DTypeCode dtype, bool zero, void** data);
// The Tensor number protocol (+, -, *, /, unary -) through the operations;
// they return NotImplemented for operands the operations do not take.
PyObject* tensor_add(PyObject* a, PyObject* b);
PyObject* tensor_sub(PyObject* a, PyObject* b);
PyObject* tensor_mul(PyObject* a, PyObject* b);
PyObject* tensor_truediv(PyObject* a, PyObject* b);
PyObject* tensor_neg(PyObject* a);

}  // namespace swpy

// Operation: the open base type of every recorded autograd node, and
// Operation.forward.
//
// Operation.forward(*inputs) runs the subclass hook _forward(*inputs) with
// grad mode off (nested operations would only build nodes this node
// replaces), records one profiler event, and, when grad mode was on and a
// Tensor input is differentiable, saves the Tensor inputs with their carrier
// version tokens and sets result.autograd_ctx to the operation. An Operation
// instance records at most one forward pass.
#include "autograd/graph.hpp"
#include "autograd/internal.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "autograd/ops_tiled.hpp"
#include "profiler_api.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "runtime/clock.hpp"
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "util/type_object.hpp"

namespace swpy {

namespace {

OperationObject* as_op(PyObject* o) { return reinterpret_cast<OperationObject*>(o); }

// ------------------------------------------------------------ Operation type

PyObject* Operation_new(PyTypeObject* type, PyObject*, PyObject*) {
  // Subclasses may give __init__ any signature, so __new__ ignores arguments.
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  OperationObject* o = as_op(self);
  o->dict = nullptr;
  o->weakreflist = nullptr;
  o->inputs = nullptr;
  o->versions = nullptr;
  o->graph_freed = false;
  return self;
}

int Operation_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if ((args && PyTuple_GET_SIZE(args) != 0) || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_Format(PyExc_TypeError, "%s() takes no arguments", type_name(self));
    return -1;
  }
  return 0;
}

int Operation_traverse(PyObject* self, visitproc visit, void* arg) {
  OperationObject* o = as_op(self);
  Py_VISIT(o->dict);
  Py_VISIT(o->inputs);
  Py_VISIT(o->versions);
  return 0;
}

int Operation_clear(PyObject* self) {
  OperationObject* o = as_op(self);
  Py_CLEAR(o->dict);
  Py_CLEAR(o->inputs);
  Py_CLEAR(o->versions);
  return 0;
}

void Operation_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  // Long graphs free a chain of nodes; the trashcan bounds the recursion.
  Py_TRASHCAN_BEGIN(self, Operation_dealloc)
  if (as_op(self)->weakreflist) PyObject_ClearWeakRefs(self);
  Operation_clear(self);
  Py_TYPE(self)->tp_free(self);
  Py_TRASHCAN_END
}

PyObject* Operation_forward(PyObject* self, PyObject* args) { return operation_forward(self, args); }

PyObject* Operation_default_forward(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement _forward()", type_name(self));
  return nullptr;
}

PyObject* Operation_default_backward(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement backward()", type_name(self));
  return nullptr;
}

PyObject* Operation_inputs(PyObject* self, PyObject*) {
  OperationObject* o = as_op(self);
  if (o->inputs) return Py_NewRef(o->inputs);
  return PyTuple_New(0);
}

PyObject* Operation_input_versions(PyObject* self, PyObject*) {
  OperationObject* o = as_op(self);
  if (o->versions) return Py_NewRef(o->versions);
  return PyTuple_New(0);
}

PyMethodDef Operation_methods[] = {
    {"forward", Operation_forward, METH_VARARGS,
     "forward(*inputs): run _forward and record this node when grad mode is on and an input is "
     "differentiable."},
    {"_forward", Operation_default_forward, METH_VARARGS, "Subclass hook computing the result Tensor."},
    {"backward", Operation_default_backward, METH_O,
     "Subclass hook: backward(gradient) returns one gradient (or None) per saved input."},
    {"inputs", Operation_inputs, METH_NOARGS, "The saved Tensor inputs (empty when none)."},
    {"input_versions", Operation_input_versions, METH_NOARGS,
     "Carrier version tokens of the saved inputs, taken at forward time."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Operation_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// ------------------------------------------------------------ forward

// Version token of a Tensor: its carrier's version counter.
PyObject* version_token(PyObject* t) {
  PyObject* c = as_tensor(t)->carrier;
  return PyLong_FromUnsignedLongLong(c ? as_carrier(c)->version : 0);
}

// Profiler event name: a str class attribute op_name, else the class name.
PyObject* event_name(PyObject* op) {
  Ref n = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(op)), "op_name"));
  if (n && PyUnicode_Check(n.get())) return n.release();
  PyErr_Clear();
  return PyUnicode_FromString(type_name(op));
}

PyObject* input_shapes(PyObject* args) {
  Ref shapes = Ref::steal(PyList_New(0));
  if (!shapes) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(a) || !as_tensor(a)->layout) continue;
    PyObject* shape = layout_shape(as_tensor(a)->layout);
    if (!shape || PyList_Append(shapes.get(), shape) < 0) return nullptr;
  }
  return PyList_AsTuple(shapes.get());
}

// Records the finished event. -1 (exception set) when recording failed.
int record(PyObject* session, PyObject* op, PyObject* args, int64_t id, int64_t parent, int64_t start,
           int64_t duration, bool succeeded) {
  Ref name = Ref::steal(event_name(op));
  if (!name) return -1;
  Ref shapes = Ref::steal(input_shapes(args));
  if (!shapes) return -1;
  const char* cname = PyUnicode_AsUTF8(name.get());
  if (!cname) return -1;
  PyObject* carrier_type = nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (is_tensor(a) && as_tensor(a)->carrier) {
      carrier_type = reinterpret_cast<PyObject*>(Py_TYPE(as_tensor(a)->carrier));
      break;
    }
  }
  return profiler_record(session, id, parent, cname, carrier_type, reinterpret_cast<PyObject*>(Py_TYPE(op)),
                         shapes.get(), start, duration, current_thread_id(), succeeded);
}

// Records the event of a forward that ended (result or exception pending).
// The forward's own exception wins over a recording failure; otherwise a
// recording failure is returned as -1.
int record_event(PyObject* session, PyObject* op, PyObject* args, int64_t id, int64_t parent, int64_t start,
                 bool succeeded) {
  const int64_t duration = sw::now_ns() - start;
  if (PyErr_Occurred()) {
    ErrorGuard keep;
    record(session, op, args, id, parent, start, duration, succeeded);
    return 0;
  }
  return record(session, op, args, id, parent, start, duration, succeeded);
}

// Saves the Tensor inputs and their version tokens on op.
int save_inputs(OperationObject* o, PyObject* args) {
  Py_ssize_t n = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i)
    if (is_tensor(PyTuple_GET_ITEM(args, i))) ++n;
  Ref inputs = Ref::steal(PyTuple_New(n));
  if (!inputs) return -1;
  Ref versions = Ref::steal(PyTuple_New(n));
  if (!versions) return -1;
  Py_ssize_t k = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(a)) continue;
    PyObject* v = version_token(a);
    if (!v) return -1;
    PyTuple_SET_ITEM(inputs.get(), k, Py_NewRef(a));
    PyTuple_SET_ITEM(versions.get(), k, v);
    ++k;
  }
  Py_XSETREF(o->inputs, inputs.release());
  Py_XSETREF(o->versions, versions.release());
  return 0;
}

// Whether forward(*args) records a node: grad mode on and a differentiable
// Tensor input.
bool wants_record(PyObject* args) {
  if (!grad_enabled()) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (is_tensor(a) && autograd::differentiable(a)) return true;
  }
  return false;
}

// Attaches op to the result of its _forward (recording). Returns result
// (stolen) or NULL with an exception.
PyObject* attach(PyObject* op, PyObject* args, Ref result) {
  if (!is_tensor(result.get())) {
    PyErr_Format(PyExc_TypeError, "%s._forward() must return a Tensor, not %.100s", type_name(op),
                 Py_TYPE(result.get())->tp_name);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    if (PyTuple_GET_ITEM(args, i) == result.get()) {
      // Attaching the node to an input would make it its own ancestor.
      PyErr_Format(PyExc_RuntimeError, "%s._forward() returned one of its inputs; return a new Tensor (a view is fine)",
                   type_name(op));
      return nullptr;
    }
  }
  // A non-differentiable result (an Int32 index, say) gets no node.
  if (!autograd::differentiable(result.get())) return result.release();
  if (save_inputs(as_op(op), args) < 0) return nullptr;
  Py_XSETREF(as_tensor(result.get())->autograd_ctx, Py_NewRef(op));
  Py_CLEAR(as_tensor(result.get())->view_source);  // this node replaces a deferred one
  return result.release();
}

}  // namespace

PyObject* operation_forward(PyObject* op, PyObject* args) {
  if (!is_operation(op)) {
    PyErr_Format(PyExc_TypeError, "forward() needs an Operation, not %.100s", Py_TYPE(op)->tp_name);
    return nullptr;
  }
  OperationObject* o = as_op(op);
  const bool want_record = wants_record(args);
  if (want_record && !sw::autograd::may_record(o->inputs != nullptr, o->graph_freed)) {
    PyErr_Format(PyExc_RuntimeError, "%s already recorded a forward pass; use a new Operation for each call",
                 type_name(op));
    return nullptr;
  }

  Ref session = Ref::borrow(profiler_current());
  int64_t id = 0, parent = 0, start = 0;
  if (session) {
    id = profiler_new_id(session.get());
    parent = profiler_parent_id(session.get());
    profiler_push(session.get(), id);
    start = sw::now_ns();
  }

  Ref result;
  Ref hook = Ref::steal(PyObject_GetAttrString(op, "_forward"));
  if (hook) {
    NoGrad off;
    if (!ops::tiled_forward(op, args, &result)) result = Ref::steal(PyObject_Call(hook.get(), args, nullptr));
  }
  if (result && want_record) result = Ref::steal(attach(op, args, std::move(result)));

  if (session) {
    profiler_pop(session.get());
    if (record_event(session.get(), op, args, id, parent, start, bool(result)) < 0) result.reset();
  }
  return result.release();
}

PyTypeObject Operation_Type = static_type("strideweave.Operation", sizeof(OperationObject));

int operation_module_init(PyObject* module) {
  Operation_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  Operation_Type.tp_doc =
      "Open base of every autograd node. Subclasses implement _forward(*inputs) and "
      "backward(gradient); forward(*inputs) runs _forward and records the node.";
  Operation_Type.tp_new = Operation_new;
  Operation_Type.tp_init = Operation_init;
  Operation_Type.tp_dealloc = Operation_dealloc;
  Operation_Type.tp_traverse = Operation_traverse;
  Operation_Type.tp_clear = Operation_clear;
  Operation_Type.tp_methods = Operation_methods;
  Operation_Type.tp_getset = Operation_getset;
  Operation_Type.tp_dictoffset = offsetof(OperationObject, dict);
  Operation_Type.tp_weaklistoffset = offsetof(OperationObject, weakreflist);
  if (add_type(module, &Operation_Type, "Operation") < 0) return -1;
  return autograd::grad_mode_module_init(module);
}

}  // namespace swpy

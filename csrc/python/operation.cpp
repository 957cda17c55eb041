// Operation: the open base type of every recorded autograd node, plus the
// thread-local grad mode (no_grad, is_grad_enabled, set_grad_enabled).
//
// Operation.forward(*inputs) runs the subclass hook _forward(*inputs) with
// grad mode off (nested operations would only build nodes this node
// replaces), records one profiler event, and, when grad mode was on and a
// Tensor input is differentiable, saves the Tensor inputs with their carrier
// version tokens and sets result.autograd_ctx to the operation. An Operation
// instance records at most one forward pass.
#include "sw.hpp"

namespace swpy {

namespace {

thread_local bool t_grad_enabled = true;

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
    PyErr_Format(PyExc_TypeError, "%s() takes no arguments", _PyType_Name(Py_TYPE(self)));
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
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement _forward()", _PyType_Name(Py_TYPE(self)));
  return nullptr;
}

PyObject* Operation_default_backward(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement backward()", _PyType_Name(Py_TYPE(self)));
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
  PyObject* n = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(op)), "op_name");
  if (n && PyUnicode_Check(n)) return n;
  Py_XDECREF(n);
  PyErr_Clear();
  return PyUnicode_FromString(_PyType_Name(Py_TYPE(op)));
}

PyObject* input_shapes(PyObject* args) {
  PyObject* shapes = PyList_New(0);
  if (!shapes) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(a) || !as_tensor(a)->layout) continue;
    PyObject* shape = reinterpret_cast<LayoutObject*>(as_tensor(a)->layout)->shape;
    if (PyList_Append(shapes, shape) < 0) { Py_DECREF(shapes); return nullptr; }
  }
  PyObject* t = PyList_AsTuple(shapes);
  Py_DECREF(shapes);
  return t;
}

// Records the finished event; keeps a pending exception of the forward.
// Returns -1 (exception set) only when recording itself failed.
int record_event(PyObject* session, PyObject* op, PyObject* args, int64_t id, int64_t parent,
                 int64_t start, bool succeeded) {
  const int64_t duration = sw::now_ns() - start;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  int rc = -1;
  PyObject* name = event_name(op);
  PyObject* shapes = name ? input_shapes(args) : nullptr;
  const char* cname = name ? PyUnicode_AsUTF8(name) : nullptr;
  if (cname && shapes) {
    PyObject* carrier_type = nullptr;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      if (is_tensor(a) && as_tensor(a)->carrier) {
        carrier_type = reinterpret_cast<PyObject*>(Py_TYPE(as_tensor(a)->carrier));
        break;
      }
    }
    rc = profiler_record(session, id, parent, cname, carrier_type, reinterpret_cast<PyObject*>(Py_TYPE(op)),
                         shapes, start, duration, current_thread_id(), succeeded);
  }
  Py_XDECREF(name);
  Py_XDECREF(shapes);
  if (et) {
    // The forward's own exception wins over a recording failure.
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return 0;
  }
  return rc;
}

// Saves the Tensor inputs and their version tokens on op.
int save_inputs(OperationObject* o, PyObject* args) {
  Py_ssize_t n = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i)
    if (is_tensor(PyTuple_GET_ITEM(args, i))) ++n;
  PyObject* inputs = PyTuple_New(n);
  PyObject* versions = inputs ? PyTuple_New(n) : nullptr;
  if (!versions) { Py_XDECREF(inputs); return -1; }
  Py_ssize_t k = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(a)) continue;
    PyObject* v = version_token(a);
    if (!v) { Py_DECREF(inputs); Py_DECREF(versions); return -1; }
    PyTuple_SET_ITEM(inputs, k, Py_NewRef(a));
    PyTuple_SET_ITEM(versions, k, v);
    ++k;
  }
  Py_XSETREF(o->inputs, inputs);
  Py_XSETREF(o->versions, versions);
  return 0;
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

PyObject* operation_forward(PyObject* op, PyObject* args) {
  if (!is_operation(op)) {
    PyErr_Format(PyExc_TypeError, "forward() needs an Operation, not %.100s", Py_TYPE(op)->tp_name);
    return nullptr;
  }
  OperationObject* o = as_op(op);
  bool want_record = false;
  if (t_grad_enabled) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      if (is_tensor(a) && as_tensor(a)->dtype && dtype_is_differentiable(as_tensor(a)->dtype)) {
        want_record = true;
        break;
      }
    }
  }
  if (want_record && (o->inputs || o->graph_freed)) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s already recorded a forward pass; use a new Operation for each call",
                 _PyType_Name(Py_TYPE(op)));
    return nullptr;
  }

  PyObject* session = profiler_current();
  int64_t id = 0, parent = 0, start = 0;
  if (session) {
    Py_INCREF(session);
    id = profiler_new_id(session);
    parent = profiler_parent_id(session);
    profiler_push(session, id);
    start = sw::now_ns();
  }

  PyObject* result = nullptr;
  PyObject* hook = PyObject_GetAttrString(op, "_forward");
  if (hook) {
    const bool prev = t_grad_enabled;
    t_grad_enabled = false;
    result = PyObject_Call(hook, args, nullptr);
    t_grad_enabled = prev;
    Py_DECREF(hook);
  }

  if (result && want_record) {
    if (!is_tensor(result)) {
      PyErr_Format(PyExc_TypeError, "%s._forward() must return a Tensor, not %.100s",
                   _PyType_Name(Py_TYPE(op)), Py_TYPE(result)->tp_name);
      Py_CLEAR(result);
    } else {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
        if (PyTuple_GET_ITEM(args, i) == result) {
          // Attaching the node to an input would make it its own ancestor.
          PyErr_Format(PyExc_RuntimeError,
                       "%s._forward() returned one of its inputs; return a new Tensor (a view is fine)",
                       _PyType_Name(Py_TYPE(op)));
          Py_CLEAR(result);
          break;
        }
      }
      TensorObject* r = result ? as_tensor(result) : nullptr;
      // A non-differentiable result (an Int32 index, say) gets no node.
      if (r && r->dtype && dtype_is_differentiable(r->dtype)) {
        if (save_inputs(o, args) < 0) {
          Py_CLEAR(result);
        } else {
          Py_XSETREF(r->autograd_ctx, Py_NewRef(op));
        }
      }
    }
  }

  if (session) {
    profiler_pop(session);
    if (record_event(session, op, args, id, parent, start, result != nullptr) < 0) Py_CLEAR(result);
    Py_DECREF(session);
  }
  return result;
}

// ------------------------------------------------------------ grad mode

namespace {

// no_grad(): a context manager switching grad mode off on this thread and
// restoring the previous mode on exit. Re-entrant: nested entries of one
// object keep a small stack of previous modes.
struct NoGradObject {
  PyObject_HEAD
  uint64_t saved;  // bit i: mode before the (i+1)-th nested entry
  int depth;
};

PyTypeObject NoGrad_Type = {
    PyVarObject_HEAD_INIT(nullptr, 0)
    "strideweave.no_grad",
    sizeof(NoGradObject),
};

PyObject* NoGrad_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if ((args && PyTuple_GET_SIZE(args) != 0) || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "no_grad() takes no arguments");
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  reinterpret_cast<NoGradObject*>(self)->saved = 0;
  reinterpret_cast<NoGradObject*>(self)->depth = 0;
  return self;
}

PyObject* NoGrad_enter(PyObject* self, PyObject*) {
  NoGradObject* o = reinterpret_cast<NoGradObject*>(self);
  if (o->depth >= 64) {
    PyErr_SetString(PyExc_RuntimeError, "no_grad entered more than 64 times without exiting");
    return nullptr;
  }
  if (t_grad_enabled) o->saved |= (uint64_t{1} << o->depth);
  else o->saved &= ~(uint64_t{1} << o->depth);
  ++o->depth;
  t_grad_enabled = false;
  Py_RETURN_NONE;
}

PyObject* NoGrad_exit(PyObject* self, PyObject*) {
  NoGradObject* o = reinterpret_cast<NoGradObject*>(self);
  if (o->depth == 0) {
    PyErr_SetString(PyExc_RuntimeError, "no_grad exited without a matching enter");
    return nullptr;
  }
  --o->depth;
  t_grad_enabled = (o->saved >> o->depth) & 1;
  Py_RETURN_FALSE;  // never swallow the exception
}

// @no_grad(): a decorated function runs with grad mode off and restores the
// caller's mode afterwards (the PyTorch habit).
struct NoGradFunctionObject {
  PyObject_HEAD
  PyObject* func;
  PyObject* dict;  // functools.update_wrapper copies __name__, __doc__, ...
};

PyTypeObject NoGradFunction_Type = {
    PyVarObject_HEAD_INIT(nullptr, 0)
    "strideweave._core._NoGradFunction",
    sizeof(NoGradFunctionObject),
};

PyObject* NoGradFunction_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  bool previous = t_grad_enabled;
  t_grad_enabled = false;
  PyObject* r = PyObject_Call(reinterpret_cast<NoGradFunctionObject*>(self)->func, args, kwargs);
  t_grad_enabled = previous;
  return r;
}

PyObject* NoGradFunction_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

int NoGradFunction_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<NoGradFunctionObject*>(self)->func);
  Py_VISIT(reinterpret_cast<NoGradFunctionObject*>(self)->dict);
  return 0;
}

int NoGradFunction_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<NoGradFunctionObject*>(self)->func);
  Py_CLEAR(reinterpret_cast<NoGradFunctionObject*>(self)->dict);
  return 0;
}

void NoGradFunction_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  NoGradFunction_clear(self);
  Py_TYPE(self)->tp_free(self);
}

PyGetSetDef NoGradFunction_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* NoGrad_call(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* func;
  if ((kwargs && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != 1 ||
      !PyCallable_Check(func = PyTuple_GET_ITEM(args, 0))) {
    PyErr_SetString(PyExc_TypeError, "no_grad() used as a decorator takes one callable");
    return nullptr;
  }
  PyObject* w = NoGradFunction_Type.tp_alloc(&NoGradFunction_Type, 0);
  if (!w) return nullptr;
  reinterpret_cast<NoGradFunctionObject*>(w)->func = Py_NewRef(func);
  PyObject* functools = PyImport_ImportModule("functools");
  PyObject* r = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", w, func) : nullptr;
  Py_XDECREF(functools);
  if (!r) {
    Py_DECREF(w);
    return nullptr;
  }
  Py_DECREF(r);
  return w;
}

PyMethodDef NoGrad_methods[] = {
    {"__enter__", NoGrad_enter, METH_NOARGS, nullptr},
    {"__exit__", NoGrad_exit, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyObject* mod_is_grad_enabled(PyObject*, PyObject*) { return PyBool_FromLong(t_grad_enabled); }

PyObject* mod_set_grad_enabled(PyObject*, PyObject* flag) {
  if (!PyBool_Check(flag)) {
    PyErr_Format(PyExc_TypeError, "set_grad_enabled() expects a bool, not %.100s", Py_TYPE(flag)->tp_name);
    return nullptr;
  }
  t_grad_enabled = flag == Py_True;
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"is_grad_enabled", mod_is_grad_enabled, METH_NOARGS,
     "is_grad_enabled() -> bool: whether operations record autograd nodes on this thread."},
    {"set_grad_enabled", mod_set_grad_enabled, METH_O,
     "set_grad_enabled(flag): switch graph recording on or off for this thread."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject Operation_Type = {
    PyVarObject_HEAD_INIT(nullptr, 0)
    "strideweave.Operation",
    sizeof(OperationObject),
};

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

  NoGrad_Type.tp_flags = Py_TPFLAGS_DEFAULT;
  NoGrad_Type.tp_doc =
      "with no_grad(): / @no_grad(): run operations without recording autograd nodes (this thread).";
  NoGrad_Type.tp_new = NoGrad_new;
  NoGrad_Type.tp_methods = NoGrad_methods;
  NoGrad_Type.tp_call = NoGrad_call;
  if (add_type(module, &NoGrad_Type, "no_grad") < 0) return -1;
  NoGradFunction_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  NoGradFunction_Type.tp_doc = "A function decorated with @no_grad(): runs with grad mode off.";
  NoGradFunction_Type.tp_call = NoGradFunction_call;
  NoGradFunction_Type.tp_descr_get = NoGradFunction_descr_get;
  NoGradFunction_Type.tp_dealloc = NoGradFunction_dealloc;
  NoGradFunction_Type.tp_traverse = NoGradFunction_traverse;
  NoGradFunction_Type.tp_clear = NoGradFunction_clear;
  NoGradFunction_Type.tp_dictoffset = offsetof(NoGradFunctionObject, dict);
  NoGradFunction_Type.tp_getset = NoGradFunction_getset;
  if (PyType_Ready(&NoGradFunction_Type) < 0) return -1;
  return PyModule_AddFunctions(module, module_methods);
}

}  // namespace swpy

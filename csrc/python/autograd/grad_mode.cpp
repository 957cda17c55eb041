// Thread-local grad mode: grad_enabled/set_grad_enabled for C++ (and the
// GradMode/NoGrad scopes of util/scopes.hpp), and for Python no_grad (a
// re-entrant context manager and a decorator), is_grad_enabled and
// set_grad_enabled.
#include <new>

#include "autograd/internal.hpp"
#include "autograd/mode_stack.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/scopes.hpp"
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "util/type_object.hpp"

namespace swpy {

namespace {

thread_local bool t_grad_enabled = true;

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

namespace autograd {

namespace {

// ------------------------------------------------------------ no_grad

// no_grad(): a context manager switching grad mode off on this thread and
// restoring the previous mode on exit; re-entrant (sw::autograd::ModeStack).
struct NoGradObject {
  PyObject_HEAD
  sw::autograd::ModeStack modes;
};

PyTypeObject NoGrad_Type = static_type("strideweave.no_grad", sizeof(NoGradObject));

NoGradObject* as_no_grad(PyObject* o) { return reinterpret_cast<NoGradObject*>(o); }

PyObject* NoGrad_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if ((args && PyTuple_GET_SIZE(args) != 0) || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "no_grad() takes no arguments");
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  new (&as_no_grad(self)->modes) sw::autograd::ModeStack();
  return self;
}

PyObject* NoGrad_enter(PyObject* self, PyObject*) {
  bool mode = false;
  if (engine_call([&] { mode = as_no_grad(self)->modes.enter(grad_enabled()); }) < 0) return nullptr;
  set_grad_enabled(mode);
  Py_RETURN_NONE;
}

PyObject* NoGrad_exit(PyObject* self, PyObject*) {
  bool mode = false;
  if (engine_call([&] { mode = as_no_grad(self)->modes.exit(); }) < 0) return nullptr;
  set_grad_enabled(mode);
  Py_RETURN_FALSE;  // never swallow the exception
}

// @no_grad(): a decorated function runs with grad mode off and restores the
// caller's mode afterwards (the PyTorch habit).
struct NoGradFunctionObject {
  PyObject_HEAD
  PyObject* func;
  PyObject* dict;  // functools.update_wrapper copies __name__, __doc__, ...
};

PyTypeObject NoGradFunction_Type = static_type("strideweave._core._NoGradFunction", sizeof(NoGradFunctionObject));

NoGradFunctionObject* as_function(PyObject* o) { return reinterpret_cast<NoGradFunctionObject*>(o); }

PyObject* NoGradFunction_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  NoGrad off;
  return PyObject_Call(as_function(self)->func, args, kwargs);
}

PyObject* NoGradFunction_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

int NoGradFunction_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_function(self)->func);
  Py_VISIT(as_function(self)->dict);
  return 0;
}

int NoGradFunction_clear(PyObject* self) {
  Py_CLEAR(as_function(self)->func);
  Py_CLEAR(as_function(self)->dict);
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
  Ref w = Ref::steal(NoGradFunction_Type.tp_alloc(&NoGradFunction_Type, 0));
  if (!w) return nullptr;
  as_function(w.get())->func = Py_NewRef(func);
  Ref functools = Ref::steal(PyImport_ImportModule("functools"));
  if (!functools) return nullptr;
  Ref r = Ref::steal(PyObject_CallMethod(functools.get(), "update_wrapper", "OO", w.get(), func));
  if (!r) return nullptr;
  return w.release();
}

PyMethodDef NoGrad_methods[] = {
    {"__enter__", NoGrad_enter, METH_NOARGS, nullptr},
    {"__exit__", NoGrad_exit, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

// ------------------------------------------------------------ module functions

PyObject* mod_is_grad_enabled(PyObject*, PyObject*) { return PyBool_FromLong(grad_enabled()); }

PyObject* mod_set_grad_enabled(PyObject*, PyObject* flag) {
  if (!PyBool_Check(flag)) {
    PyErr_Format(PyExc_TypeError, "set_grad_enabled() expects a bool, not %.100s", Py_TYPE(flag)->tp_name);
    return nullptr;
  }
  set_grad_enabled(flag == Py_True);
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"is_grad_enabled", mod_is_grad_enabled, METH_NOARGS,
     "is_grad_enabled() -> bool: whether operations record autograd nodes on this thread."},
    {"set_grad_enabled", mod_set_grad_enabled, METH_O,
     "set_grad_enabled(flag): switch graph recording on or off for this thread."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int grad_mode_module_init(PyObject* module) {
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

}  // namespace autograd

}  // namespace swpy

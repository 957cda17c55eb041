// AwaitResult / AwaitMove: read-only completion handles. The terminal outcome
// is recorded once (await_complete / await_fail, GIL held); wait() blocks on
// the engine Completion with the GIL released and then returns the same
// result object, or raises the same exception object, on every call.
#include <chrono>

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "await_object.hpp"
#include "move/move.hpp"
#include "module.hpp"
#include "profiler_api.hpp"
#include "util/errors.hpp"
#include "util/fastcall.hpp"
#include "util/ref.hpp"
#include "util/compat.hpp"
#include "util/scopes.hpp"
#include "runtime/clock.hpp"
#include "runtime/executor.hpp"
#include "movement/submit_policy.hpp"
#include "util/type_object.hpp"

namespace swpy {

// The terminal outcome is written once, with the GIL held, before the
// completion is set, so a waiter that sees it set reads a stable result/error.
struct AwaitObject {
  PyObject_HEAD
  PyObject* weakreflist;
  sw::Completion* completion;  // owned
  PyObject* result;            // terminal value on success
  PyObject* error;             // terminal exception instance on failure
  PyObject* error_tb;          // error's traceback when recorded (or NULL)
  PyObject* runner;            // callable a waiter runs before blocking (or NULL; cleared at terminal)
};

namespace {

AwaitObject* as_await(PyObject* o) { return reinterpret_cast<AwaitObject*>(o); }

int Await_traverse(PyObject* self, visitproc visit, void* arg) {
  AwaitObject* a = as_await(self);
  Py_VISIT(a->result);
  Py_VISIT(a->error);
  Py_VISIT(a->error_tb);
  Py_VISIT(a->runner);
  return 0;
}

int Await_clear(PyObject* self) {
  // Only called by the collector, which cannot reach a handle a pending move
  // still holds (the job owns a strong reference), so the outcome is final.
  AwaitObject* a = as_await(self);
  Py_CLEAR(a->result);
  Py_CLEAR(a->error);
  Py_CLEAR(a->error_tb);
  Py_CLEAR(a->runner);
  return 0;
}

void Await_dealloc(PyObject* self) {
  AwaitObject* a = as_await(self);
  PyObject_GC_UnTrack(self);
  if (a->weakreflist) PyObject_ClearWeakRefs(self);
  Await_clear(self);
  // Nobody waits on it: every waiter holds a reference while it waits.
  delete a->completion;
  a->completion = nullptr;
  Py_TYPE(self)->tp_free(self);
}

PyObject* Await_repr(PyObject* self) {
  AwaitObject* a = as_await(self);
  const char* state = !a->completion->done() ? "pending" : (a->error ? "failed" : "done");
  return PyUnicode_FromFormat("<%s %s>", type_name(self), state);
}

PyObject* Await_get_done(PyObject* self, void*) { return PyBool_FromLong(as_await(self)->completion->done()); }

// Re-raises the recorded exception object itself (identity is part of the
// contract) with the traceback it had when the operation failed: raising
// appends the waiter's frames to __traceback__, so without the reset every
// wait() would grow it (and pin every caller frame).
PyObject* raise_recorded(AwaitObject* a) {
  if (PyExceptionInstance_Check(a->error) &&
      PyException_SetTraceback(a->error, a->error_tb ? a->error_tb : Py_None) < 0)
    return nullptr;
  compat::restore_raised(Py_NewRef(a->error));
  return nullptr;
}

// Blocks until done or until deadline_ns (< 0: none) passed. The GIL is
// released while blocked; the main thread wakes every 100 ms to run signal
// handlers so Ctrl-C interrupts a long wait. 1 done, 0 timed out, -1 error.
int block(AwaitObject* a, int64_t deadline_ns) {
  using sw::movement::WaitOutcome;
  WaitOutcome outcome = WaitOutcome::Done;
  const int r = engine_call([a, deadline_ns, &outcome] {
    outcome = sw::movement::wait_in_slices(
        *a->completion, deadline_ns, std::chrono::milliseconds(100),
        [a](std::chrono::nanoseconds step) {
          GilRelease unlocked;
          return a->completion->wait_for(step);
        },
        [] { return PyErr_CheckSignals() >= 0; });
  });
  if (r < 0 || outcome == WaitOutcome::Interrupted) return -1;
  return outcome == WaitOutcome::Done ? 1 : 0;
}

PyObject* Await_wait(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"timeout", nullptr};
  PyObject* timeout = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:wait", const_cast<char**>(kwlist), &timeout)) return nullptr;
  int64_t deadline = -1;
  if (timeout != Py_None) {
    if (PyBool_Check(timeout)) {
      PyErr_SetString(PyExc_TypeError, "timeout must be a number or None, not bool");
      return nullptr;
    }
    const double secs = PyFloat_AsDouble(timeout);
    if (secs == -1.0 && PyErr_Occurred()) return nullptr;
    if (engine_call([&deadline, secs] { deadline = sw::movement::timeout_deadline(sw::now_ns(), secs); }) < 0)
      return nullptr;
  }
  AwaitObject* a = as_await(self);
  // An untimed wait first runs the work no worker has started yet (the
  // framework's runner, taken by the first such waiter only): that spares
  // the hand-off to a worker and back. The runner records the work's own
  // failures on the handle; what it raises itself propagates.
  if (timeout == Py_None && a->runner && !a->completion->done()) {
    Ref runner = Ref::steal(a->runner);
    a->runner = nullptr;
    // The work records into the session its request captured, never into
    // this thread's own (a worker has none).
    PyObject* session = profiler_detach();
    Ref ran = Ref::steal(PyObject_CallNoArgs(runner.get()));
    profiler_reattach(session);
    if (!ran) return nullptr;
  }
  Ref keep = Ref::borrow(self);  // keeps the completion alive across the unlocked wait
  int r = block(a, deadline);
  PyObject* out = nullptr;
  if (r == 0) {
    PyErr_SetString(PyExc_TimeoutError, "the operation did not complete within the timeout");
  } else if (r > 0) {
    if (a->error)
      raise_recorded(a);
    else if (a->result)
      out = Py_NewRef(a->result);
    else
      out = Py_NewRef(Py_None);
  }
  return out;
}

PyMethodDef Await_methods[] = {
    {"wait", method_cast(Await_wait),
     METH_VARARGS | METH_KEYWORDS,
     "wait($self, /, timeout=None)\n--\n\nBlock (with the GIL released) until the terminal outcome is recorded, then return "
     "the result or raise the recorded exception: the same object on every call, from any thread. timeout (an "
     "extension) raises TimeoutError when it passes first; the operation itself continues."},
    // The spec writes AwaitResult[T] / AwaitMove[Tensor]: subscriptable at run
    // time too, so such annotations evaluate (PEP 585).
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS, "See PEP 585."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Await_getset[] = {
    {"done", Await_get_done, nullptr, "True once a terminal success or failure is recorded.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject AwaitResult_Type = static_type("strideweave.AwaitResult", sizeof(AwaitObject));
PyTypeObject AwaitMove_Type = static_type("strideweave.AwaitMove", sizeof(AwaitObject));
PyTypeObject AwaitProjection_Type = static_type("strideweave.AwaitProjection", sizeof(AwaitObject));
PyTypeObject AwaitResidency_Type = static_type("strideweave.AwaitResidency", sizeof(AwaitObject));

PyObject* await_new(PyTypeObject* type) {
  // Zero-filled and GC-tracked; traverse copes with the NULL fields.
  Ref self = Ref::steal(PyType_GenericAlloc(type, 0));
  if (!self) return nullptr;
  AwaitObject* a = as_await(self.get());
  a->weakreflist = nullptr;
  a->result = nullptr;
  a->error = nullptr;
  a->error_tb = nullptr;
  a->runner = nullptr;
  a->completion = nullptr;
  if (engine_call([&] { a->completion = new sw::Completion(); }) < 0) return nullptr;
  return self.release();
}

int await_complete(PyObject* handle, PyObject* value) {
  AwaitObject* a = as_await(handle);
  if (a->completion->done()) return 0;
  a->result = Py_NewRef(value);
  a->completion->set();
  Py_CLEAR(a->runner);
  return 1;
}

int await_fail(PyObject* handle) {
  AwaitObject* a = as_await(handle);
  if (a->completion->done()) {
    PyErr_Clear();
    return 0;
  }
  PyObject* exc = compat::take_raised();
  if (!exc) {  // no exception was set: record a generic one rather than success
    exc = PyObject_CallFunction(PyExc_RuntimeError, "s", "the operation failed without an exception");
    if (!exc) {
      PyErr_Clear();
      exc = Py_NewRef(PyExc_RuntimeError);
    }
  }
  a->error = exc;
  if (PyExceptionInstance_Check(exc)) a->error_tb = PyException_GetTraceback(exc);
  a->completion->set();
  Py_CLEAR(a->runner);
  return 1;
}

bool await_done(PyObject* handle) { return as_await(handle)->completion->done(); }

int await_set_runner(PyObject* handle, PyObject* runner) {
  AwaitObject* a = as_await(handle);
  if (a->completion->done()) return 0;
  Py_XSETREF(a->runner, Py_XNewRef(runner));
  return 1;
}

int await_hooks_init(PyObject* module);  // private completion hooks, end of file

int await_module_init(PyObject* module) {
  // Neither type has tp_new: handles are created by the framework only, so
  // calling the class raises TypeError. No tp_as_async: no __await__.
  AwaitResult_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  AwaitResult_Type.tp_doc =
      "Read-only completion handle created by the framework: done, wait(). Not constructible, not awaitable.";
  AwaitResult_Type.tp_dealloc = Await_dealloc;
  AwaitResult_Type.tp_traverse = Await_traverse;
  AwaitResult_Type.tp_clear = Await_clear;
  AwaitResult_Type.tp_repr = Await_repr;
  AwaitResult_Type.tp_methods = Await_methods;
  AwaitResult_Type.tp_getset = Await_getset;
  AwaitResult_Type.tp_weaklistoffset = offsetof(AwaitObject, weakreflist);
  if (add_type(module, &AwaitResult_Type, "AwaitResult") < 0) return -1;
  // The framework-created handle kinds share AwaitResult's behaviour.
  struct Kind {
    PyTypeObject* type;
    const char* name;
    const char* doc;
  };
  const Kind kinds[] = {
      {&AwaitMove_Type, "AwaitMove",
       "Handle of one move_async (or TiledEvictable.scatter()): wait() returns the moved (scattered) Tensor."},
      {&AwaitProjection_Type, "AwaitProjection",
       "Handle of TiledEvictable.project(): wait() returns one compact ordinary Tensor."},
      {&AwaitResidency_Type, "AwaitResidency",
       "Handle of TiledEvictable.promote_async()/evict_async(): wait() returns None."},
  };
  for (const Kind& k : kinds) {
    k.type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
    k.type->tp_doc = k.doc;
    k.type->tp_base = &AwaitResult_Type;
    k.type->tp_dealloc = Await_dealloc;
    k.type->tp_traverse = Await_traverse;
    k.type->tp_clear = Await_clear;
    k.type->tp_weaklistoffset = offsetof(AwaitObject, weakreflist);
    if (add_type(module, k.type, k.name) < 0) return -1;
  }
  return await_hooks_init(module);
}

// ---------------------------------------------------------------------------
// Private hooks (_core._await_new / _await_complete / _await_fail) through
// which Python-written framework code (TiledEvictable) creates and finishes
// the native handle kinds. They are not public API: users still cannot
// construct a handle, and a handle reaches exactly one terminal outcome.
namespace {

PyObject* hook_await_new(PyObject*, PyObject* kind) {
  if (!PyUnicode_Check(kind)) {
    PyErr_Format(PyExc_TypeError, "_await_new() kind must be a str, not %s", type_name(kind));
    return nullptr;
  }
  PyTypeObject* type = nullptr;
  if (PyUnicode_CompareWithASCIIString(kind, "move") == 0)
    type = &AwaitMove_Type;
  else if (PyUnicode_CompareWithASCIIString(kind, "projection") == 0)
    type = &AwaitProjection_Type;
  else if (PyUnicode_CompareWithASCIIString(kind, "residency") == 0)
    type = &AwaitResidency_Type;
  if (!type) {
    PyErr_Format(PyExc_ValueError, "_await_new() kind must be 'move', 'projection' or 'residency', not %R", kind);
    return nullptr;
  }
  return await_new(type);
}

int check_handle(PyObject* handle, const char* fn) {
  if (PyObject_TypeCheck(handle, &AwaitResult_Type)) return 0;
  PyErr_Format(PyExc_TypeError, "%s() handle must be an AwaitResult, not %s", fn, type_name(handle));
  return -1;
}

constexpr Signature kAwaitComplete{"_await_complete", {"handle", "value"}, 2, 2, 2};
constexpr Signature kAwaitFail{"_await_fail", {"handle", "exc"}, 2, 2, 2};
constexpr Signature kAwaitSetRunner{"_await_set_runner", {"handle", "runner"}, 2, 2, 2};

// True when this call recorded the outcome; False (handle unchanged) when the
// handle was already terminal. Needs only the GIL, so any thread may call it.
PyObject* hook_await_complete(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* p[2];
  if (parse_positional(kAwaitComplete, args, nargs, p) < 0) return nullptr;
  if (check_handle(p[0], "_await_complete") < 0) return nullptr;
  return PyBool_FromLong(await_complete(p[0], p[1]));
}

PyObject* hook_await_fail(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* p[2];
  if (parse_positional(kAwaitFail, args, nargs, p) < 0) return nullptr;
  if (check_handle(p[0], "_await_fail") < 0) return nullptr;
  PyObject* exc = p[1];
  if (!PyExceptionInstance_Check(exc)) {
    PyErr_Format(PyExc_TypeError, "_await_fail() exc must be an exception instance, not %s", type_name(exc));
    return nullptr;
  }
  if (await_done(p[0])) Py_RETURN_FALSE;
  // await_fail records the pending exception: that is exc itself, so wait()
  // raises this very object.
  compat::restore_raised(Py_NewRef(exc));
  return PyBool_FromLong(await_fail(p[0]));
}

// Sets (or with None clears) the callable an untimed wait() runs before
// blocking; False when the handle is already terminal (nothing is kept).
PyObject* hook_await_set_runner(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* p[2];
  if (parse_positional(kAwaitSetRunner, args, nargs, p) < 0) return nullptr;
  if (check_handle(p[0], "_await_set_runner") < 0) return nullptr;
  PyObject* fn = p[1];
  if (fn != Py_None && !PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "_await_set_runner() runner must be callable or None, not %s", type_name(fn));
    return nullptr;
  }
  AwaitObject* a = as_await(p[0]);
  if (a->completion->done()) Py_RETURN_FALSE;
  Py_XSETREF(a->runner, fn == Py_None ? nullptr : Py_NewRef(fn));
  Py_RETURN_TRUE;
}

PyMethodDef hook_methods[] = {
    {"_await_new", hook_await_new, METH_O,
     "_await_new(kind, /)\n--\n\nPrivate: a fresh pending AwaitMove ('move'), AwaitProjection ('projection') or "
     "AwaitResidency ('residency')."},
    {"_await_complete", method_cast(hook_await_complete),
     METH_FASTCALL,
     "_await_complete(handle, value, /)\n--\n\nPrivate: record success; True when this call made the terminal "
     "transition."},
    {"_await_fail", method_cast(hook_await_fail), METH_FASTCALL,
     "_await_fail(handle, exc, /)\n--\n\nPrivate: record failure with the exception instance exc; True when this "
     "call made the terminal transition."},
    {"_await_set_runner", method_cast(hook_await_set_runner), METH_FASTCALL,
     "_await_set_runner(handle, runner, /)\n--\n\nPrivate: the callable (None: none) that the first untimed wait() "
     "on the pending handle calls, with the GIL held, before it blocks; dropped at the terminal transition. False "
     "when the handle is already terminal."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int await_hooks_init(PyObject* module) { return PyModule_AddFunctions(module, hook_methods); }

}  // namespace swpy

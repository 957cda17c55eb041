// Completion handles (await.cpp): AwaitResult and its framework-created
// subclasses.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy {

// AwaitResult is the read-only base of every framework-created handle
// (AwaitMove, AwaitProjection, AwaitResidency).
extern PyTypeObject AwaitResult_Type;
extern PyTypeObject AwaitMove_Type;
extern PyTypeObject AwaitProjection_Type;
extern PyTypeObject AwaitResidency_Type;
inline bool is_await(PyObject* o) { return PyObject_TypeCheck(o, &AwaitResult_Type); }
// A fresh pending handle of type (AwaitResult_Type or a native subclass).
PyObject* await_new(PyTypeObject* type);
// Records success with value (a new reference is taken) and wakes every
// waiter. 1 when this call made the terminal transition, 0 when the handle
// was already terminal (nothing changes).
int await_complete(PyObject* handle, PyObject* value);
// Records failure with the currently raised exception, which is consumed
// (cleared). 1 / 0 as await_complete.
int await_fail(PyObject* handle);
bool await_done(PyObject* handle);
// The callable (NULL: none) the first untimed wait() on the pending handle
// calls, GIL held, before it blocks; dropped at the terminal transition.
// 1 when set, 0 when the handle is already terminal.
int await_set_runner(PyObject* handle, PyObject* runner);

}  // namespace swpy

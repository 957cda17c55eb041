// Taking the GIL back while the interpreter exits.
//
// CPython before 3.14 ends a thread that takes the GIL after finalization
// began (PyEval_RestoreThread, PyGILState_Ensure) with pthread_exit, which
// unwinds the thread's C++ frames: through a noexcept frame (any destructor,
// GilRelease's included) that is std::terminate, and through any other frame
// it runs destructors that touch Python objects without the GIL. So no
// thread takes the GIL back through StrideWeave once exit is under way:
//
// - the exit handler, once pending moves have been waited for, closes the
//   gate (close()) and lets every thread already on its way to the GIL get
//   there, releasing the GIL until none is left (bounded);
// - after that, a thread coming back from a call that released the GIL
//   (restore_thread) never takes the GIL again: it sleeps until the process
//   ends, which is what CPython 3.14 does with such a thread; a thread that
//   only wants the GIL for a moment (ensure: a move worker's commit, an
//   export's deleter) skips its Python work instead.
//
// The thread that closed the gate (the one running the exit handlers and
// finalization) is never held back. Without close() (the exit handler was
// unregistered), the gate shuts once finalization has begun, for every
// thread but the main one.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace swpy::gil_gate {

// Records the main thread (call once, GIL held, at module init).
void init();

// PyEval_RestoreThread(ts), unless the gate is shut for this thread: then
// this thread never returns.
void restore_thread(PyThreadState* ts) noexcept;

// PyGILState_Ensure() into *out, unless the gate is shut for this thread
// (or the interpreter is gone): false then, and the GIL is not held.
bool ensure(PyGILState_STATE* out) noexcept;

// Shuts the gate for every thread but this one (GIL held), then releases the
// GIL until each thread already past the gate holds it or limit_s passed.
void close(double limit_s);

// Whether close() ran (for tests and diagnostics).
bool closed() noexcept;

// In a forked child (GIL held): the parent's other threads are gone.
void after_fork_child();

}  // namespace swpy::gil_gate

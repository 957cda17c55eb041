// Profiling hooks (profiler.cpp) used by operations and moves.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace swpy {

// Profiling hooks used by operations and moves. A session is the object the
// active profile(...) context owns; it is thread-local to the thread that
// entered it, but events may be recorded into it from any thread (a move's
// completion on a worker) while holding the GIL.
// Borrowed reference to this thread's active session, or NULL (no error).
PyObject* profiler_current();
// Detaches this thread's session (a new reference, or NULL) so that
// nothing run on this thread records into it until profiler_reattach puts
// it back (and consumes the reference): framework work a waiting thread
// runs in a worker's stead (await.cpp) records as it would on the worker.
PyObject* profiler_detach();
void profiler_reattach(PyObject* session);
// Fresh event id within session (ids are unique per session).
int64_t profiler_new_id(PyObject* session);
// This thread's innermost open operation event id in session (0 if none);
// operations push their id while running so nested events get a parent.
int64_t profiler_parent_id(PyObject* session);
void profiler_push(PyObject* session, int64_t id);
void profiler_pop(PyObject* session);
// Records one finished event. carrier_type / implementation_type are
// classes (or NULL for None); input_shapes is a tuple of Shape or NULL.
// The session applies its carriers= filter and record_shapes= flag.
// Returns -1 with an exception set only on memory failure.
int profiler_record(PyObject* session, int64_t id, int64_t parent_id, const char* name,
                    PyObject* carrier_type, PyObject* implementation_type, PyObject* input_shapes,
                    int64_t start_ns, int64_t duration_ns, uint64_t thread_id, bool succeeded);

}  // namespace swpy

// Profiling sessions: the native side of strideweave.profile. A session
// collects raw events; strideweave/_profiler.py turns them into frozen
// ProfilerEvent records, aggregates and renders them.
#include <string>
#include <vector>

#include "carrier_object.hpp"
#include "profiler_api.hpp"
#include "module.hpp"
#include "util/errors.hpp"
#include "clock.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

struct RawEvent {
  int64_t id;
  int64_t parent_id;
  std::string name;
  PyObject* carrier_type;         // strong or NULL
  PyObject* implementation_type;  // strong or NULL
  PyObject* input_shapes;         // strong or NULL
  int64_t start_ns;
  int64_t duration_ns;
  uint64_t thread_id;
  bool succeeded;
};

struct SessionObject {
  PyObject_HEAD
  std::vector<RawEvent>* events;
  PyObject* carriers;  // tuple of classes or NULL (all)
  int64_t next_id;
  bool record_shapes;
  int state;  // 0 new, 1 active, 2 finished
};

SessionObject* as_session(PyObject* o) { return reinterpret_cast<SessionObject*>(o); }

// This thread's active session and its stack of open operation events. The
// slot holds a strong reference: a profile entered and then dropped without
// exit (possibly on another thread) must not leave a dangling pointer here.
thread_local PyObject* tls_session = nullptr;
thread_local std::vector<std::pair<PyObject*, int64_t>> tls_stack;

PyTypeObject Session_Type = static_type("strideweave._core._ProfileSession", sizeof(SessionObject));

PyObject* Session_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"carriers", "record_shapes", nullptr};
  PyObject* carriers = Py_None;
  int record_shapes = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$Op:_ProfileSession", const_cast<char**>(kwlist), &carriers,
                                   &record_shapes))
    return nullptr;
  PyObject* filter = nullptr;
  if (carriers != Py_None) {
    if (PyType_Check(carriers)) {
      filter = PyTuple_Pack(1, carriers);
    } else {
      filter = PySequence_Tuple(carriers);
    }
    if (!filter) return nullptr;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(filter); ++i) {
      PyObject* c = PyTuple_GET_ITEM(filter, i);
      if (!PyType_Check(c) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(c), &Carrier_Type)) {
        Py_DECREF(filter);
        PyErr_SetString(PyExc_TypeError, "carriers must be Carrier classes (or None for all)");
        return nullptr;
      }
    }
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) {
    Py_XDECREF(filter);
    return nullptr;
  }
  SessionObject* s = as_session(self);
  s->events = new std::vector<RawEvent>();
  s->carriers = filter;
  s->next_id = 1;
  s->record_shapes = record_shapes != 0;
  s->state = 0;
  return self;
}

void clear_events(SessionObject* s) {
  if (!s->events) return;
  for (auto& e : *s->events) {
    Py_CLEAR(e.carrier_type);
    Py_CLEAR(e.implementation_type);
    Py_CLEAR(e.input_shapes);
  }
  s->events->clear();
}

int Session_traverse(PyObject* self, visitproc visit, void* arg) {
  SessionObject* s = as_session(self);
  Py_VISIT(s->carriers);
  if (s->events)
    for (auto& e : *s->events) {
      Py_VISIT(e.carrier_type);
      Py_VISIT(e.implementation_type);
      Py_VISIT(e.input_shapes);
    }
  return 0;
}

int Session_clear(PyObject* self) {
  SessionObject* s = as_session(self);
  Py_CLEAR(s->carriers);
  clear_events(s);
  return 0;
}

// This thread's session, dropping it first when it was exited elsewhere
// (another thread) or when only this slot still refers to it: its profile
// was abandoned without exit, so nobody can read its events or end it any
// more. Borrowed; NULL when none.
PyObject* tls_live_session() {
  if (tls_session && (as_session(tls_session)->state != 1 || Py_REFCNT(tls_session) == 1)) {
    as_session(tls_session)->state = 2;
    Py_CLEAR(tls_session);
  }
  return tls_session;
}

void Session_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Session_clear(self);
  delete as_session(self)->events;
  Py_TYPE(self)->tp_free(self);
}

PyObject* Session_enter(PyObject* self, PyObject*) {
  SessionObject* s = as_session(self);
  if (s->state != 0) {
    PyErr_SetString(PyExc_RuntimeError, "a profile context is single-use and was already entered");
    return nullptr;
  }
  if (tls_live_session()) {
    PyErr_SetString(PyExc_RuntimeError, "another profile context is already active on this thread");
    return nullptr;
  }
  s->state = 1;
  tls_session = Py_NewRef(self);
  Py_RETURN_NONE;
}

PyObject* Session_exit(PyObject* self, PyObject*) {
  SessionObject* s = as_session(self);
  if (s->state == 1) s->state = 2;
  if (tls_session == self) Py_CLEAR(tls_session);
  Py_RETURN_NONE;
}

PyObject* none_or(PyObject* o) { return o ? Py_NewRef(o) : Py_NewRef(Py_None); }

// Raw events as tuples: (id, parent_id, name, carrier_type,
// implementation_type, input_shapes, start_ns, duration_ns, thread_id,
// succeeded).
PyObject* Session_events(PyObject* self, PyObject*) {
  SessionObject* s = as_session(self);
  PyObject* out = PyList_New(0);
  if (!out) return nullptr;
  // Index and copy each event: an allocation below can run the collector,
  // whose finalizers may record events and reallocate the store.
  const size_t n = s->events->size();
  for (size_t i = 0; i < n && i < s->events->size(); ++i) {
    RawEvent e;
    try {
      e = (*s->events)[i];  // its objects stay owned by the store
    } catch (const std::bad_alloc&) {
      Py_DECREF(out);
      return PyErr_NoMemory();
    }
    PyObject* t = Py_BuildValue("(LLsNNNLLKO)", static_cast<long long>(e.id), static_cast<long long>(e.parent_id),
                                e.name.c_str(), none_or(e.carrier_type), none_or(e.implementation_type),
                                none_or(e.input_shapes), static_cast<long long>(e.start_ns),
                                static_cast<long long>(e.duration_ns),
                                static_cast<unsigned long long>(e.thread_id), e.succeeded ? Py_True : Py_False);
    if (!t || PyList_Append(out, t) < 0) {
      Py_XDECREF(t);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(t);
  }
  return out;
}

PyObject* Session_get_active(PyObject* self, void*) { return PyBool_FromLong(as_session(self)->state == 1); }

PyMethodDef Session_methods[] = {
    {"_enter", Session_enter, METH_NOARGS, "Make this session active on the calling thread."},
    {"_exit", Session_exit, METH_NOARGS, "Deactivate this session."},
    {"_events", Session_events, METH_NOARGS, "Raw recorded events as tuples."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Session_getset[] = {{"active", Session_get_active, nullptr, "entered and not exited", nullptr},
                                {nullptr, nullptr, nullptr, nullptr, nullptr}};

bool passes_filter(SessionObject* s, PyObject* carrier_type) {
  if (!s->carriers) return true;
  if (!carrier_type || !PyType_Check(carrier_type)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->carriers); ++i)
    if (PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(carrier_type),
                         reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(s->carriers, i))))
      return true;
  return false;
}

}  // namespace

PyObject* profiler_current() {
  PyObject* s = tls_live_session();
  if (s && as_session(s)->state == 1) return s;
  return nullptr;
}

int64_t profiler_new_id(PyObject* session) { return session ? as_session(session)->next_id++ : 0; }

int64_t profiler_parent_id(PyObject* session) {
  for (auto it = tls_stack.rbegin(); it != tls_stack.rend(); ++it)
    if (it->first == session) return it->second;
  return 0;
}

void profiler_push(PyObject* session, int64_t id) {
  if (session) tls_stack.emplace_back(session, id);
}

void profiler_pop(PyObject* session) {
  for (auto it = tls_stack.rbegin(); it != tls_stack.rend(); ++it) {
    if (it->first == session) {
      tls_stack.erase(std::next(it).base());
      return;
    }
  }
}

int profiler_record(PyObject* session, int64_t id, int64_t parent_id, const char* name, PyObject* carrier_type,
                    PyObject* implementation_type, PyObject* input_shapes, int64_t start_ns, int64_t duration_ns,
                    uint64_t thread_id, bool succeeded) {
  if (!session) return 0;
  SessionObject* s = as_session(session);
  if (!passes_filter(s, carrier_type)) return 0;
  try {
    s->events->push_back(RawEvent{id, parent_id, name, carrier_type ? Py_NewRef(carrier_type) : nullptr,
                                  implementation_type ? Py_NewRef(implementation_type) : nullptr,
                                  (s->record_shapes && input_shapes) ? Py_NewRef(input_shapes) : nullptr,
                                  start_ns, duration_ns, thread_id, succeeded});
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Private recording hooks for framework code written in Python
// (TiledEvictable's tile transfers record move.submit / move.complete pairs
// the way native moves do). Not public API.
namespace {

PyObject* hook_session(PyObject*, PyObject*) {
  PyObject* s = profiler_current();
  return Py_NewRef(s ? s : Py_None);
}

PyObject* hook_now_ns(PyObject*, PyObject*) { return PyLong_FromLongLong(static_cast<long long>(sw::now_ns())); }

// _profiler_record(session, name, carrier_type, implementation_type,
// start_ns, duration_ns, succeeded, parent_id=None, input_shapes=None) -> the
// event's id (input_shapes, a tuple, is kept when the session records shapes). The
// event is stamped with the calling thread; a parent_id of None means the
// innermost open operation event of this thread (0 when none), as for a
// native move.submit. A carrier filter that excludes carrier_type drops the
// event but still returns its id, so children can name it.
PyObject* hook_record(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"session",     "name",     "carrier_type", "implementation_type", "start_ns",
                                 "duration_ns", "succeeded", "parent_id",    "input_shapes", nullptr};
  PyObject *session, *carrier_type, *impl_type, *parent = Py_None, *shapes = Py_None;
  const char* name;
  long long start_ns, duration_ns;
  int succeeded;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OsOOLLp|OO:_profiler_record", const_cast<char**>(kwlist), &session,
                                   &name, &carrier_type, &impl_type, &start_ns, &duration_ns, &succeeded, &parent,
                                   &shapes))
    return nullptr;
  if (shapes != Py_None && !PyTuple_Check(shapes)) {
    PyErr_Format(PyExc_TypeError, "_profiler_record() input_shapes must be a tuple or None, not %s", type_name(shapes));
    return nullptr;
  }
  if (!PyObject_TypeCheck(session, &Session_Type)) {
    PyErr_Format(PyExc_TypeError, "_profiler_record() session must be a _ProfileSession, not %s", type_name(session));
    return nullptr;
  }
  for (PyObject* t : {carrier_type, impl_type})
    if (t != Py_None && !PyType_Check(t)) {
      PyErr_Format(PyExc_TypeError, "_profiler_record() carrier_type and implementation_type must be classes or "
                   "None, not %s", type_name(t));
      return nullptr;
    }
  if (duration_ns < 0) {
    PyErr_SetString(PyExc_ValueError, "_profiler_record() duration_ns must be non-negative");
    return nullptr;
  }
  int64_t parent_id;
  if (parent == Py_None) {
    parent_id = profiler_parent_id(session);
  } else {
    parent_id = PyLong_AsLongLong(parent);
    if (parent_id == -1 && PyErr_Occurred()) return nullptr;
  }
  const int64_t id = profiler_new_id(session);
  if (profiler_record(session, id, parent_id, name, carrier_type == Py_None ? nullptr : carrier_type,
                      impl_type == Py_None ? nullptr : impl_type, shapes == Py_None ? nullptr : shapes, start_ns,
                      duration_ns, current_thread_id(), succeeded != 0) < 0)
    return nullptr;
  return PyLong_FromLongLong(static_cast<long long>(id));
}

PyMethodDef hook_methods[] = {
    {"_profiler_session", hook_session, METH_NOARGS,
     "_profiler_session()\n--\n\nPrivate: the calling thread's active profiling session, or None."},
    {"_profiler_now_ns", hook_now_ns, METH_NOARGS,
     "_profiler_now_ns()\n--\n\nPrivate: the profiler clock (monotonic nanoseconds)."},
    {"_profiler_record", method_cast(hook_record),
     METH_VARARGS | METH_KEYWORDS,
     "_profiler_record(session, name, carrier_type, implementation_type, start_ns, duration_ns, succeeded, "
     "parent_id=None, input_shapes=None)\n--\n\nPrivate: record one event on the calling thread; returns its id."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int profiler_module_init(PyObject* module) {
  Session_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  Session_Type.tp_doc = "Native event store behind strideweave.profile (private).";
  Session_Type.tp_new = Session_new;
  Session_Type.tp_dealloc = Session_dealloc;
  Session_Type.tp_traverse = Session_traverse;
  Session_Type.tp_clear = Session_clear;
  Session_Type.tp_methods = Session_methods;
  Session_Type.tp_getset = Session_getset;
  if (add_type(module, &Session_Type, "_ProfileSession") < 0) return -1;
  return PyModule_AddFunctions(module, hook_methods);
}

}  // namespace swpy

// Profiling sessions: the native side of strideweave.profile. A session
// object wraps the engine's event store (sw::profiling::EventStore: events,
// ids, lifecycle, carrier filter, open-event stacks) and pins the classes and
// shapes its events name; strideweave/_profiler.py turns the raw events into
// frozen ProfilerEvent records, aggregates and renders them.
#include <new>
#include <utility>
#include <vector>

#include "carrier_object.hpp"
#include "profiler_api.hpp"
#include "module.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/args.hpp"
#include "runtime/clock.hpp"
#include "profiling/event_store.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

using sw::profiling::EventStore;
using sw::profiling::Key;

struct SessionObject {
  PyObject_HEAD
  EventStore* store;
};

SessionObject* as_session(PyObject* o) { return reinterpret_cast<SessionObject*>(o); }
EventStore& store_of(PyObject* session) { return *as_session(session)->store; }

Key key(PyObject* o) { return reinterpret_cast<Key>(o); }
PyObject* object(Key k) { return reinterpret_cast<PyObject*>(k); }

// The store pins what it keeps (every call holds the GIL).
const sw::profiling::KeyOps key_ops = [] {
  sw::profiling::KeyOps ops;
  ops.retain = [](Key k) { Py_INCREF(object(k)); };
  ops.release = [](Key k) { Py_DECREF(object(k)); };  // raw: retain()'s reference, held by the engine's store
  ops.is_subclass = [](Key cls, Key base) {
    auto type = [](Key k) { return reinterpret_cast<PyTypeObject*>(object(k)); };
    return PyType_Check(object(cls)) && PyType_IsSubtype(type(cls), type(base));
  };
  return ops;
}();

// This thread's active session. The slot holds a strong reference: a
// profile entered and then dropped without exit (possibly on another
// thread) must not leave a dangling pointer here.
thread_local PyObject* tls_session = nullptr;

PyTypeObject Session_Type = static_type("strideweave._core._ProfileSession", sizeof(SessionObject));

// The carriers= argument as filter classes; 0 / -1.
int parse_filter(PyObject* carriers, std::vector<Key>* filter) {
  Ref seq = Ref::steal(PyType_Check(carriers) ? PyTuple_Pack(1, carriers) : PySequence_Tuple(carriers));
  if (!seq) return -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq.get()); ++i) {
    PyObject* c = PyTuple_GET_ITEM(seq.get(), i);
    if (!PyType_Check(c) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(c), &Carrier_Type)) {
      PyErr_SetString(PyExc_TypeError, "carriers must be Carrier classes (or None for all)");
      return -1;
    }
  }
  return engine_call([&] {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq.get()); ++i) filter->push_back(key(PyTuple_GET_ITEM(seq.get(), i)));
  });
}

PyObject* Session_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"carriers", "record_shapes", nullptr};
  PyObject* carriers = Py_None;
  int record_shapes = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$Op:_ProfileSession", const_cast<char**>(kwlist), &carriers,
                                   &record_shapes))
    return nullptr;
  std::vector<Key> filter;
  if (carriers != Py_None && parse_filter(carriers, &filter) < 0) return nullptr;
  Ref self = Ref::steal(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  if (engine_call([&] {
        as_session(self.get())->store = new EventStore(key_ops, std::move(filter), carriers != Py_None,
                                                       record_shapes != 0);
      }) < 0)
    return nullptr;
  return self.release();
}

int Session_traverse(PyObject* self, visitproc visit, void* arg) {
  EventStore* store = as_session(self)->store;
  return store ? store->visit_keys([&](Key k) { return visit(object(k), arg); }) : 0;
}

int Session_clear(PyObject* self) {
  if (EventStore* store = as_session(self)->store) store->clear();
  return 0;
}

// This thread's session, dropping it first when it was exited elsewhere
// (another thread) or when only this slot still refers to it: its profile
// was abandoned without exit, so nobody can read its events or end it any
// more. Borrowed; NULL when none.
PyObject* tls_live_session() {
  if (tls_session && (!store_of(tls_session).active() || Py_REFCNT(tls_session) == 1)) {
    store_of(tls_session).finish();
    Py_CLEAR(tls_session);
  }
  return tls_session;
}

void Session_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  EventStore* store = as_session(self)->store;
  as_session(self)->store = nullptr;
  delete store;  // releases its pins
  Py_TYPE(self)->tp_free(self);
}

PyObject* Session_enter(PyObject* self, PyObject*) {
  EventStore& store = store_of(self);
  // A used session is refused for that first (enter() raises), a new one
  // while this thread has another.
  if (store.state() == sw::profiling::SessionState::New && tls_live_session()) {
    PyErr_SetString(PyExc_RuntimeError, "another profile context is already active on this thread");
    return nullptr;
  }
  if (engine_call([&store] { store.enter(); }) < 0) return nullptr;
  tls_session = Py_NewRef(self);
  Py_RETURN_NONE;
}

PyObject* Session_exit(PyObject* self, PyObject*) {
  store_of(self).exit();
  if (tls_session == self) Py_CLEAR(tls_session);
  Py_RETURN_NONE;
}

PyObject* none_or(Key k) { return Py_NewRef(k ? object(k) : Py_None); }

// Raw events as tuples: (id, parent_id, name, carrier_type,
// implementation_type, input_shapes, start_ns, duration_ns, thread_id,
// succeeded).
PyObject* Session_events(PyObject* self, PyObject*) {
  const EventStore& store = store_of(self);
  Ref out = Ref::steal(PyList_New(0));
  if (!out) return nullptr;
  // Index and copy each event: an allocation below can run the collector,
  // whose finalizers may record events and reallocate the store.
  const size_t n = store.size();
  for (size_t i = 0; i < n && i < store.size(); ++i) {
    sw::profiling::Event e;
    if (engine_call([&] { e = store.at(i); }) < 0) return nullptr;  // its objects stay pinned by the store
    Ref t = Ref::steal(Py_BuildValue("(LLsNNNLLKO)", static_cast<long long>(e.id), static_cast<long long>(e.parent_id),
                                     e.name.c_str(), none_or(e.carrier_type), none_or(e.implementation_type),
                                     none_or(e.input_shapes), static_cast<long long>(e.start_ns),
                                     static_cast<long long>(e.duration_ns),
                                     static_cast<unsigned long long>(e.thread_id), e.succeeded ? Py_True : Py_False));
    if (!t || PyList_Append(out.get(), t.get()) < 0) return nullptr;
  }
  return out.release();
}

PyObject* Session_get_active(PyObject* self, void*) { return PyBool_FromLong(store_of(self).active()); }

PyMethodDef Session_methods[] = {
    {"_enter", Session_enter, METH_NOARGS, "Make this session active on the calling thread."},
    {"_exit", Session_exit, METH_NOARGS, "Deactivate this session."},
    {"_events", Session_events, METH_NOARGS, "Raw recorded events as tuples."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Session_getset[] = {{"active", Session_get_active, nullptr, "entered and not exited", nullptr},
                                {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyObject* profiler_current() {
  PyObject* s = tls_live_session();
  return s && store_of(s).active() ? s : nullptr;
}

PyObject* profiler_detach() {
  PyObject* s = tls_session;
  tls_session = nullptr;
  return s;
}

void profiler_reattach(PyObject* session) {
  if (tls_session) {
    Ref dropped = Ref::steal(session);  // a session entered meanwhile stays
  } else {
    tls_session = session;
  }
}

int64_t profiler_new_id(PyObject* session) { return session ? store_of(session).new_id() : 0; }

int64_t profiler_parent_id(PyObject* session) { return sw::profiling::parent_id(session); }

void profiler_push(PyObject* session, int64_t id) {
  if (!session) return;
  // Out of memory: the events nested in this one lose their parent (the
  // MemoryError is dropped; a pending exception stays).
  ErrorGuard keep;
  engine_call([&] { sw::profiling::push_open(session, id); });
}

void profiler_pop(PyObject* session) { sw::profiling::pop_open(session); }

int profiler_record(PyObject* session, int64_t id, int64_t parent_id, const char* name, PyObject* carrier_type,
                    PyObject* implementation_type, PyObject* input_shapes, int64_t start_ns, int64_t duration_ns,
                    uint64_t thread_id, bool succeeded) {
  if (!session) return 0;
  return engine_call([&] {
    sw::profiling::Event e;
    e.id = id;
    e.parent_id = parent_id;
    e.name = name;
    e.carrier_type = key(carrier_type);
    e.implementation_type = key(implementation_type);
    e.input_shapes = key(input_shapes);
    e.start_ns = start_ns;
    e.duration_ns = duration_ns;
    e.thread_id = thread_id;
    e.succeeded = succeeded;
    store_of(session).record(std::move(e));
  });
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
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OsOOO&O&p|OO:_profiler_record", const_cast<char**>(kwlist),
                                   &session, &name, &carrier_type, &impl_type, ns_arg, &start_ns, ns_arg,
                                   &duration_ns, &succeeded, &parent, &shapes))
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
    long long v;
    if (!int64_value(parent, &v, "_profiler_record() parent_id")) return nullptr;
    parent_id = v;
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

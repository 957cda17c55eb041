// Carrier extension (strideweave.carriers.extension): definition-backed
// Python carriers and their exact transfer routes.
//
// A CarrierDefinition gives a Python subclass of Carrier its storage (a
// StorageProvider of callables taking the carrier first) and its outgoing
// TransferRoutes. The registry is process-global and sealed per class: a
// class is registered at most once and only before it is observed (an
// instance built, a route resolved, a legacy registry call naming it);
// observing a class observes its Python bases too, so a definition can never
// change how an already-seen class stores or moves its values.
//
// Storage: a definition-backed instance gets one of the vtables below (one
// per storage dtype, so the dtype needs no per-instance field); carrier.cpp
// then drives its slots through the provider like any built-in. A subclass
// without its own definition inherits its nearest defined base's storage,
// never its routes.
//
// Movement: move.cpp resolves each exact pair through move_route_hooks. A
// route is performed by a per-route MoveOperation subclass; move.cpp calls
// the prepare hook after every validation (TransferProvider.prepare, grad
// mode off), the submit hook on the calling thread (PreparedTransfer.submit)
// and, for a returned ProviderCompletion, the wait hook on a worker, then
// the same terminal commit as every other move.
#include <cstddef>

#include "sw.hpp"

namespace swpy {

namespace {

const char* tname(PyTypeObject* t) { return _PyType_Name(t); }
const char* oname(PyObject* o) { return _PyType_Name(Py_TYPE(o)); }

bool is_carrier_class(PyObject* o) {
  return PyType_Check(o) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), &Carrier_Type);
}

// ------------------------------------------------------------ records
// Immutable records share one layout: up to kMaxFields read-only members.
constexpr int kMaxFields = 7;

struct RecordObject {
  PyObject_HEAD
  PyObject* f[kMaxFields];
};

RecordObject* as_record(PyObject* o) { return reinterpret_cast<RecordObject*>(o); }

struct RecordSpec {
  const char* name;
  const char* fields[kMaxFields + 1];  // NULL-terminated
  int nrequired;
  const char* doc;
  // Checks (and normalises or defaults) the parsed fields; 0 / -1.
  int (*validate)(PyObject** f);
};

enum RecordKind { kStorage, kTransferProvider, kRoute, kDefinition, kRequest, kPrepared, kUnsupported, kKinds };

// Field indices used by the framework.
enum { S_SUPPORTS, S_SIZE, S_ALLOCATE, S_RELEASE, S_READ, S_WRITE, S_FALLBACK };
enum { R_SOURCE, R_DEST, R_ID, R_PROVIDER };
enum { D_STORAGE, D_TRANSFERS };

#define SW_RECORD_TYPE {PyVarObject_HEAD_INIT(nullptr, 0) nullptr, 0}
PyTypeObject Record_Types[kKinds] = {SW_RECORD_TYPE, SW_RECORD_TYPE, SW_RECORD_TYPE, SW_RECORD_TYPE,
                                     SW_RECORD_TYPE, SW_RECORD_TYPE, SW_RECORD_TYPE};
#undef SW_RECORD_TYPE

bool is_record(PyObject* o, RecordKind k) { return Py_TYPE(o) == &Record_Types[k]; }

int need_callable(PyObject** f, int i, const char* record, const char* field) {
  if (PyCallable_Check(f[i])) return 0;
  PyErr_Format(PyExc_TypeError, "%s %s must be callable, not %.100s", record, field, oname(f[i]));
  return -1;
}

int need_carrier_class(PyObject* o, const char* record, const char* field) {
  if (is_carrier_class(o)) return 0;
  PyErr_Format(PyExc_TypeError, "%s %s must be a Carrier subclass, not %R", record, field, o);
  return -1;
}

int validate_storage(PyObject** f) {
  static const char* names[] = {"supports_dtype", "physical_size", "allocate", "release", "read", "write"};
  for (int i = 0; i < 6; ++i)
    if (need_callable(f, i, "StorageProvider", names[i]) < 0) return -1;
  if (!f[S_FALLBACK]) f[S_FALLBACK] = Py_NewRef(Py_False);
  if (!PyBool_Check(f[S_FALLBACK])) {
    PyErr_Format(PyExc_TypeError, "StorageProvider elementwise_fallback must be a bool, not %.100s",
                 oname(f[S_FALLBACK]));
    return -1;
  }
  return 0;
}

int validate_transfer_provider(PyObject** f) { return need_callable(f, 0, "TransferProvider", "prepare"); }

int validate_route(PyObject** f) {
  if (need_carrier_class(f[R_SOURCE], "TransferRoute", "source_class") < 0 ||
      need_carrier_class(f[R_DEST], "TransferRoute", "destination_class") < 0)
    return -1;
  if (!PyUnicode_Check(f[R_ID])) {
    PyErr_Format(PyExc_TypeError, "TransferRoute route_id must be a str, not %.100s", oname(f[R_ID]));
    return -1;
  }
  if (PyUnicode_GetLength(f[R_ID]) == 0) {
    PyErr_SetString(PyExc_ValueError, "TransferRoute route_id must be a non-empty str");
    return -1;
  }
  if (!is_record(f[R_PROVIDER], kTransferProvider)) {
    PyErr_Format(PyExc_TypeError, "TransferRoute provider must be a TransferProvider, not %.100s",
                 oname(f[R_PROVIDER]));
    return -1;
  }
  return 0;
}

int validate_definition(PyObject** f) {
  if (!is_record(f[D_STORAGE], kStorage)) {
    PyErr_Format(PyExc_TypeError, "CarrierDefinition storage must be a StorageProvider, not %.100s",
                 oname(f[D_STORAGE]));
    return -1;
  }
  PyObject* routes = f[D_TRANSFERS] ? PySequence_Tuple(f[D_TRANSFERS]) : PyTuple_New(0);
  if (!routes) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "CarrierDefinition transfers must be an iterable of TransferRoute, not %.100s",
                   oname(f[D_TRANSFERS]));
    }
    return -1;
  }
  Py_XSETREF(f[D_TRANSFERS], routes);
  const Py_ssize_t n = PyTuple_GET_SIZE(routes);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* r = PyTuple_GET_ITEM(routes, i);
    if (!is_record(r, kRoute)) {
      PyErr_Format(PyExc_TypeError, "CarrierDefinition transfers must hold TransferRoute objects, not %.100s",
                   oname(r));
      return -1;
    }
    for (Py_ssize_t k = 0; k < i; ++k) {
      PyObject* q = PyTuple_GET_ITEM(routes, k);
      if (as_record(q)->f[R_SOURCE] == as_record(r)->f[R_SOURCE] &&
          as_record(q)->f[R_DEST] == as_record(r)->f[R_DEST]) {
        PyErr_Format(PyExc_ValueError,
                     "CarrierDefinition declares two routes for the exact pair (%s, %s): %R and %R; at most one "
                     "route per exact pair",
                     tname(reinterpret_cast<PyTypeObject*>(as_record(r)->f[R_SOURCE])),
                     tname(reinterpret_cast<PyTypeObject*>(as_record(r)->f[R_DEST])), as_record(q)->f[R_ID],
                     as_record(r)->f[R_ID]);
        return -1;
      }
    }
  }
  return 0;
}

int validate_request(PyObject** f) {
  if (!is_tensor(f[0])) {
    PyErr_Format(PyExc_TypeError, "TransferRequest tensor must be a Tensor, not %.100s", oname(f[0]));
    return -1;
  }
  if (!is_carrier(f[1])) {
    PyErr_Format(PyExc_TypeError, "TransferRequest destination must be a Carrier instance, not %.100s", oname(f[1]));
    return -1;
  }
  if (need_carrier_class(f[2], "TransferRequest", "source_class") < 0 ||
      need_carrier_class(f[3], "TransferRequest", "destination_class") < 0)
    return -1;
  if (!is_dtype(f[4])) {
    PyErr_Format(PyExc_TypeError, "TransferRequest dtype must be a DType, not %.100s", oname(f[4]));
    return -1;
  }
  if (!is_layout(f[5])) {
    PyErr_Format(PyExc_TypeError, "TransferRequest layout must be a Layout, not %.100s", oname(f[5]));
    return -1;
  }
  if (!PyLong_Check(f[6]) || PyBool_Check(f[6])) {
    PyErr_Format(PyExc_TypeError, "TransferRequest physical_span must be an int, not %.100s", oname(f[6]));
    return -1;
  }
  if (PyLong_AsSsize_t(f[6]) < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "TransferRequest physical_span must be non-negative");
    return -1;
  }
  return 0;
}

int validate_prepared(PyObject** f) { return need_callable(f, 0, "PreparedTransfer", "submit"); }

int validate_unsupported(PyObject** f) {
  if (PyUnicode_Check(f[0])) return 0;
  PyErr_Format(PyExc_TypeError, "Unsupported reason must be a str, not %.100s", oname(f[0]));
  return -1;
}

const RecordSpec kSpecs[kKinds] = {
    {"StorageProvider",
     {"supports_dtype", "physical_size", "allocate", "release", "read", "write", "elementwise_fallback", nullptr},
     6,
     "StorageProvider(supports_dtype, physical_size, allocate, release, read, write, elementwise_fallback=False)\n"
     "--\n\n"
     "Storage of a definition-backed carrier class. Every callable takes the carrier first: "
     "supports_dtype(carrier, dtype) -> bool, physical_size(carrier) -> int, allocate(carrier, slots) (provide "
     "that many slots, each reading as the dtype's zero), release(carrier) (called exactly once), "
     "read(carrier, i), write(carrier, i, value) (value already coerced to the storage dtype). "
     "elementwise_fallback permits ElementwiseMoveOperation for an exact pair without a route. Immutable.",
     validate_storage},
    {"TransferProvider",
     {"prepare", nullptr},
     1,
     "TransferProvider(prepare)\n--\n\nThe mechanics of one route: prepare(request: TransferRequest) returns a "
     "PreparedTransfer or Unsupported. It runs with grad mode off, after every validation. Immutable.",
     validate_transfer_provider},
    {"TransferRoute",
     {"source_class", "destination_class", "route_id", "provider", nullptr},
     4,
     "TransferRoute(source_class, destination_class, route_id, provider)\n--\n\nAn outgoing route of the exact "
     "source class's CarrierDefinition to one exact destination class. Matching uses class identity; no route is "
     "inherited by a subclass. Immutable.",
     validate_route},
    {"CarrierDefinition",
     {"storage", "transfers", nullptr},
     1,
     "CarrierDefinition(storage, transfers=())\n--\n\nA carrier class's StorageProvider and its outgoing "
     "TransferRoutes (a tuple, at most one per exact pair). Register it with register_carrier_definition(). "
     "Immutable.",
     validate_definition},
    {"TransferRequest",
     {"tensor", "destination", "source_class", "destination_class", "dtype", "layout", "physical_span", nullptr},
     7,
     "TransferRequest(tensor, destination, source_class, destination_class, dtype, layout, physical_span)\n--\n\n"
     "One validated move handed to TransferProvider.prepare: the source Tensor, the destination carrier, both "
     "exact classes, the logical dtype, the Layout and its cosize (the physical span to transfer from the "
     "Tensor's offset). Immutable.",
     validate_request},
    {"PreparedTransfer",
     {"submit", nullptr},
     1,
     "PreparedTransfer(submit)\n--\n\nsubmit() performs or starts the transfer on the calling thread (grad mode "
     "off, owner access to both carriers) and returns None when finished, or a ProviderCompletion a worker waits "
     "on. Immutable.",
     validate_prepared},
    {"Unsupported",
     {"reason", nullptr},
     1,
     "Unsupported(reason)\n--\n\nprepare()'s refusal: the permitted elementwise fallback runs instead, or "
     "move_async raises NotImplementedError containing reason. Immutable.",
     validate_unsupported},
};

PyMemberDef Record_members[kKinds][kMaxFields + 1];

const RecordSpec* spec_of(PyTypeObject* t) {
  for (int k = 0; k < kKinds; ++k)
    if (t == &Record_Types[k]) return &kSpecs[k];
  return nullptr;
}

int nfields(const RecordSpec* s) {
  int n = 0;
  while (s->fields[n]) ++n;
  return n;
}

PyObject* Record_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  const RecordSpec* s = spec_of(type);
  if (!s) {
    PyErr_SetString(PyExc_TypeError, "unknown record type");
    return nullptr;
  }
  const int n = nfields(s);
  char format[2 * kMaxFields + 40];
  int pos = 0;
  for (int i = 0; i < n; ++i) {
    if (i == s->nrequired) format[pos++] = '|';
    format[pos++] = 'O';
  }
  PyOS_snprintf(format + pos, sizeof(format) - pos, ":%s", s->name);
  PyObject* p[kMaxFields] = {};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, const_cast<char**>(s->fields), &p[0], &p[1], &p[2], &p[3],
                                   &p[4], &p[5], &p[6]))
    return nullptr;
  for (int i = 0; i < n; ++i) Py_XINCREF(p[i]);
  if (s->validate(p) < 0) {
    for (int i = 0; i < n; ++i) Py_XDECREF(p[i]);
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) {
    for (int i = 0; i < n; ++i) Py_XDECREF(p[i]);
    return nullptr;
  }
  for (int i = 0; i < n; ++i) as_record(self)->f[i] = p[i];
  return self;
}

int Record_traverse(PyObject* self, visitproc visit, void* arg) {
  for (PyObject* o : as_record(self)->f) Py_VISIT(o);
  return 0;
}

int Record_clear(PyObject* self) {
  for (PyObject*& o : as_record(self)->f) Py_CLEAR(o);
  return 0;
}

void Record_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Record_clear(self);
  Py_TYPE(self)->tp_free(self);
}

PyObject* Record_repr(PyObject* self) {
  const RecordSpec* s = spec_of(Py_TYPE(self));
  if (!s) return PyObject_Repr(self);
  int rc = Py_ReprEnter(self);
  if (rc != 0) return rc > 0 ? PyUnicode_FromFormat("%s(...)", s->name) : nullptr;
  PyObject* parts = PyList_New(0);
  PyObject* out = nullptr;
  if (parts) {
    bool ok = true;
    for (int i = 0; s->fields[i] && ok; ++i) {
      PyObject* v = as_record(self)->f[i];
      PyObject* part = PyUnicode_FromFormat("%s=%R", s->fields[i], v ? v : Py_None);
      ok = part && PyList_Append(parts, part) == 0;
      Py_XDECREF(part);
    }
    PyObject* sep = ok ? PyUnicode_FromString(", ") : nullptr;
    PyObject* body = sep ? PyUnicode_Join(sep, parts) : nullptr;
    if (body) out = PyUnicode_FromFormat("%s(%U)", s->name, body);
    Py_XDECREF(body);
    Py_XDECREF(sep);
    Py_DECREF(parts);
  }
  Py_ReprLeave(self);
  return out;
}

char g_type_names[kKinds][80];

int ready_records(PyObject* module) {
  for (int k = 0; k < kKinds; ++k) {
    const RecordSpec* s = &kSpecs[k];
    for (int i = 0; s->fields[i]; ++i) {
      PyMemberDef& m = Record_members[k][i];
      m.name = s->fields[i];
      m.type = T_OBJECT_EX;
      m.offset = static_cast<Py_ssize_t>(offsetof(RecordObject, f) + i * sizeof(PyObject*));
      m.flags = READONLY;
      m.doc = nullptr;
    }
    PyOS_snprintf(g_type_names[k], sizeof(g_type_names[k]), "strideweave.carriers.extension.%s", s->name);
    PyTypeObject* t = &Record_Types[k];
    t->tp_name = g_type_names[k];
    t->tp_basicsize = sizeof(RecordObject);
    t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
    t->tp_doc = s->doc;
    t->tp_new = Record_new;
    t->tp_dealloc = Record_dealloc;
    t->tp_traverse = Record_traverse;
    t->tp_clear = Record_clear;
    t->tp_repr = Record_repr;
    t->tp_members = Record_members[k];
    t->tp_free = PyObject_GC_Del;
    if (add_type(module, t, s->name) < 0) return -1;
  }
  return 0;
}

// ------------------------------------------------------------ ProviderCompletion

PyObject* Completion_wait(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement wait()", oname(self));
  return nullptr;
}

PyMethodDef Completion_methods[] = {
    {"wait", Completion_wait, METH_NOARGS,
     "wait() -> None: block until the transfer finished; raise its failure. Subclasses implement it."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject ProviderCompletion_Type = {PyVarObject_HEAD_INIT(nullptr, 0)
                                        "strideweave.carriers.extension.ProviderCompletion",
                                        sizeof(PyObject)};

// ------------------------------------------------------------ registry state
// All process-lifetime dicts (classes are kept alive: a sealed class's
// dispatch never changes).
PyObject* g_definitions = nullptr;  // cls -> CarrierDefinition
PyObject* g_routes = nullptr;       // (src cls, dst cls) -> route operation class
PyObject* g_route_of = nullptr;     // route operation class -> TransferRoute
PyObject* g_observed = nullptr;     // observed cls -> its StorageProvider (own or inherited) or None

PyTypeObject RouteMove_Type = {PyVarObject_HEAD_INIT(nullptr, 0)
                               "strideweave.carriers.extension.TransferRouteMoveOperation",
                               sizeof(MoveOperationObject)};

bool is_heap(PyTypeObject* t) { return (t->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0; }

// The StorageProvider governing cls, found along its Python bases (borrowed;
// NULL when definition-free). Does not observe.
PyObject* find_storage(PyTypeObject* cls) {
  PyObject* mro = cls->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return nullptr;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(mro); ++k) {
    auto* c = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, k));
    if (!is_heap(c)) break;
    PyObject* def = PyDict_GetItem(g_definitions, reinterpret_cast<PyObject*>(c));
    if (def) return as_record(def)->f[D_STORAGE];
  }
  return nullptr;
}

// Observes cls and every Python base (sealing them) and returns cls's
// StorageProvider (borrowed) or NULL. 0 / -1.
int observe(PyTypeObject* cls, PyObject** storage) {
  *storage = nullptr;
  if (!is_heap(cls)) return 0;  // built-ins never have a definition
  PyObject* key = reinterpret_cast<PyObject*>(cls);
  PyObject* s = PyDict_GetItemWithError(g_observed, key);
  if (!s) {
    if (PyErr_Occurred()) return -1;
    PyObject* mro = cls->tp_mro;
    for (Py_ssize_t k = 0; mro && k < PyTuple_GET_SIZE(mro); ++k) {
      auto* c = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, k));
      if (!is_heap(c)) break;
      int has = PyDict_Contains(g_observed, reinterpret_cast<PyObject*>(c));
      if (has < 0) return -1;
      if (has) continue;
      PyObject* cs = find_storage(c);
      if (PyDict_SetItem(g_observed, reinterpret_cast<PyObject*>(c), cs ? cs : Py_None) < 0) return -1;
    }
    s = PyDict_GetItemWithError(g_observed, key);
    if (!s) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "carrier class observation failed");
      return -1;
    }
  }
  *storage = s == Py_None ? nullptr : s;
  return 0;
}

// Whether ElementwiseMoveOperation may serve the exact pair: each class that
// has a definition (own or inherited) must set elementwise_fallback; a
// definition-free class keeps its legacy contract, under which every
// unregistered pair falls back.
bool fallback_permitted(PyObject* src_storage, PyObject* dst_storage) {
  return (!src_storage || as_record(src_storage)->f[S_FALLBACK] == Py_True) &&
         (!dst_storage || as_record(dst_storage)->f[S_FALLBACK] == Py_True);
}

const char* permits(PyObject* storage) {
  if (!storage) return "definition-free";
  return as_record(storage)->f[S_FALLBACK] == Py_True ? "permits the elementwise fallback"
                                                        : "does not permit the elementwise fallback";
}

// ------------------------------------------------------------ definition-backed storage
// One vtable per storage dtype: an instance's vt encodes its dtype.
constexpr sw::DTypeCode kStorageCodes[] = {sw::DTypeCode::Any,     sw::DTypeCode::Floating, sw::DTypeCode::Float32,
                                           sw::DTypeCode::Float64, sw::DTypeCode::Int32,    sw::DTypeCode::Bool};
constexpr int kNumStorageCodes = sizeof(kStorageCodes) / sizeof(kStorageCodes[0]);
extern const CarrierVTable kDefVT[kNumStorageCodes];

int code_index(sw::DTypeCode c) {
  for (int i = 0; i < kNumStorageCodes; ++i)
    if (kStorageCodes[i] == c) return i;
  return -1;
}

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return kStorageCodes[o->vt - kDefVT]; }

PyObject* self_of(CarrierObject* o) { return reinterpret_cast<PyObject*>(o); }

// The instance's StorageProvider (its class was observed when it was built).
PyObject* storage_of(CarrierObject* o) {
  PyObject* s = nullptr;
  if (observe(Py_TYPE(o), &s) < 0) return nullptr;
  if (!s) PyErr_Format(PyExc_SystemError, "%s has no StorageProvider", oname(self_of(o)));
  return s;
}

// Calls storage field idx with (carrier, *extra). New reference or NULL.
PyObject* call_storage(CarrierObject* o, int idx, PyObject* a = nullptr, PyObject* b = nullptr) {
  PyObject* s = storage_of(o);
  if (!s) return nullptr;
  PyObject* fn = as_record(s)->f[idx];
  PyObject* args[3] = {self_of(o), a, b};
  return PyObject_Vectorcall(fn, args, b ? 3 : (a ? 2 : 1), nullptr);
}

Py_ssize_t vt_size(CarrierObject* o) {
  PyObject* r = call_storage(o, S_SIZE);
  if (!r) return -1;
  if (!PyLong_Check(r) || PyBool_Check(r)) {
    PyErr_Format(PyExc_TypeError, "%s StorageProvider.physical_size() must return an int, not %.100s",
                 oname(self_of(o)), oname(r));
    Py_DECREF(r);
    return -1;
  }
  Py_ssize_t n = PyLong_AsSsize_t(r);
  Py_DECREF(r);
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "%s StorageProvider.physical_size() returned a negative size", oname(self_of(o)));
    return -1;
  }
  return n;
}

PyObject* vt_get(CarrierObject* o, Py_ssize_t i) {
  PyObject* idx = PyLong_FromSsize_t(i);
  if (!idx) return nullptr;
  PyObject* r = call_storage(o, S_READ, idx);
  Py_DECREF(idx);
  if (!r) return nullptr;
  // Reads return canonical values of the storage dtype, as built-ins do.
  PyObject* v = value_coerce(vt_dtype_code(o), r);
  Py_DECREF(r);
  return v;
}

int vt_set(CarrierObject* o, Py_ssize_t i, PyObject* v) {
  PyObject* x = value_coerce(vt_dtype_code(o), v);
  if (!x) return -1;
  PyObject* idx = PyLong_FromSsize_t(i);
  PyObject* r = idx ? call_storage(o, S_WRITE, idx, x) : nullptr;
  Py_XDECREF(idx);
  Py_DECREF(x);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

// Calls the provider's release exactly once (marking the carrier released
// first, so a re-entrant or repeated _release() does nothing). An exception
// stays set for carrier_release to report.
void vt_release(CarrierObject* o) {
  if (o->released) return;
  o->released = true;
  PyObject* r = call_storage(o, S_RELEASE);
  Py_XDECREF(r);
}

// type(slots, dtype=dtype, mutable=mutable_): the construction contract.
PyObject* make_like(PyTypeObject* type, Py_ssize_t n, PyObject* dtype, bool mutable_) {
  PyObject* args = Py_BuildValue("(n)", n);
  PyObject* kwargs = args ? Py_BuildValue("{s:O,s:O}", "dtype", dtype, "mutable", mutable_ ? Py_True : Py_False)
                          : nullptr;
  PyObject* r = kwargs ? PyObject_Call(reinterpret_cast<PyObject*>(type), args, kwargs) : nullptr;
  Py_XDECREF(args);
  Py_XDECREF(kwargs);
  if (r && Py_TYPE(r) != type) {
    PyErr_Format(PyExc_TypeError, "%s(...) did not build a %s", tname(type), tname(type));
    Py_CLEAR(r);
  }
  return r;
}

PyObject* vt_new_like(CarrierObject* o, PyObject* values, bool mutable_, PyObject* dtype) {
  if (!dtype) dtype = dtype_singleton(vt_dtype_code(o));  // kept after release
  PyObject* seq = PySequence_Fast(values, "new_like() values must be iterable");
  if (!seq) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject* c = make_like(Py_TYPE(o), n, dtype, true);
  for (Py_ssize_t i = 0; c && i < n; ++i) {
    if (carrier_set_unchecked(c, i, PySequence_Fast_GET_ITEM(seq, i)) < 0) Py_CLEAR(c);
  }
  Py_DECREF(seq);
  if (c) as_carrier(c)->constructed_mutable = mutable_;
  return c;
}

PyObject* vt_allocate_like(CarrierObject* o, Py_ssize_t n, bool mutable_, PyObject* dtype, bool) {
  // allocate() provides zero slots, so empty=True is served the same way.
  if (!dtype) dtype = dtype_singleton(vt_dtype_code(o));
  return make_like(Py_TYPE(o), n, dtype, mutable_);
}

// allocate(carrier, n) and a check that it provided n slots. 0 / -1.
int allocate_slots(CarrierObject* o, Py_ssize_t n) {
  PyObject* count = PyLong_FromSsize_t(n);
  PyObject* r = count ? call_storage(o, S_ALLOCATE, count) : nullptr;
  Py_XDECREF(count);
  if (!r) return -1;
  Py_DECREF(r);
  Py_ssize_t got = vt_size(o);
  if (got < 0) return -1;
  if (got != n) {
    PyErr_Format(PyExc_ValueError, "%s StorageProvider.allocate(carrier, %zd) provided %zd slots", oname(self_of(o)),
                 n, got);
    return -1;
  }
  return 0;
}

int vt_reserve(CarrierObject* o, Py_ssize_t n) {
  Py_ssize_t size = vt_size(o);
  if (size < 0) return -1;
  if (size != 0) return 0;  // only an empty destination grows
  return allocate_slots(o, n) < 0 ? -1 : 1;
}

#define SW_DEF_VT                                                                                         \
  {                                                                                                       \
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like, vt_reserve, nullptr, \
        nullptr                                                                                           \
  }
const CarrierVTable kDefVT[kNumStorageCodes] = {SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT};
#undef SW_DEF_VT

// ------------------------------------------------------------ route hooks

int hook_legacy_check(PyTypeObject* src, PyTypeObject* dst) {
  if (!is_heap(src) && !is_heap(dst)) return 0;
  PyObject *ss, *ds;
  if (observe(src, &ss) < 0 || observe(dst, &ds) < 0) return -1;
  if (!ss && !ds) return 0;
  PyTypeObject* defined = ss ? src : dst;
  PyErr_Format(PyExc_RuntimeError,
               "the legacy move registry does not govern (%s, %s): %s is definition-backed; express its movement "
               "with a TransferRoute in its CarrierDefinition",
               tname(src), tname(dst), tname(defined));
  return -1;
}

int hook_resolve(PyTypeObject* src, PyTypeObject* dst, PyObject** op_class) {
  *op_class = nullptr;
  if (!is_heap(src) && !is_heap(dst)) return 0;  // built-in pairs: the legacy registry
  PyObject *ss, *ds;
  if (observe(src, &ss) < 0 || observe(dst, &ds) < 0) return -1;
  if (!ss && !ds) return 0;
  PyObject* key = PyTuple_Pack(2, reinterpret_cast<PyObject*>(src), reinterpret_cast<PyObject*>(dst));
  if (!key) return -1;
  PyObject* op = PyDict_GetItemWithError(g_routes, key);
  Py_DECREF(key);
  if (op) {
    *op_class = Py_NewRef(op);
    return 1;
  }
  if (PyErr_Occurred()) return -1;
  if (fallback_permitted(ss, ds)) {
    *op_class = Py_NewRef(reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type));
    return 1;
  }
  PyErr_Format(PyExc_NotImplementedError,
               "no transfer route moves %s to %s: %s declares no TransferRoute for this exact pair, and the "
               "elementwise fallback needs both classes to permit it (%s %s; %s %s)",
               tname(src), tname(dst), tname(src), tname(src), permits(ss), tname(dst), permits(ds));
  return -1;
}

// A fresh TransferRequest for a validated move (fields are known-good).
PyObject* make_request(PyObject* tensor, PyObject* dest) {
  TensorObject* t = as_tensor(tensor);
  PyObject* span = PyLong_FromLongLong(layout_of(t->layout).cosize());
  if (!span) return nullptr;
  PyObject* r = Record_Types[kRequest].tp_alloc(&Record_Types[kRequest], 0);
  if (!r) {
    Py_DECREF(span);
    return nullptr;
  }
  PyObject** f = as_record(r)->f;
  f[0] = Py_NewRef(tensor);
  f[1] = Py_NewRef(dest);
  f[2] = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(t->carrier)));
  f[3] = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(dest)));
  f[4] = Py_NewRef(t->dtype);
  f[5] = Py_NewRef(t->layout);
  f[6] = span;
  return r;
}

int hook_prepare(PyObject* op_class, PyObject* tensor, PyObject* dest, bool allow_fallback, PyObject** prepared) {
  *prepared = nullptr;
  PyObject* route = PyDict_GetItemWithError(g_route_of, op_class);
  if (!route) return PyErr_Occurred() ? -1 : 0;
  Py_INCREF(route);
  PyObject* request = make_request(tensor, dest);
  if (!request) {
    Py_DECREF(route);
    return -1;
  }
  PyObject* prepare = as_record(as_record(route)->f[R_PROVIDER])->f[0];
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  PyObject* r = PyObject_CallOneArg(prepare, request);
  set_grad_enabled(prev);
  Py_DECREF(request);
  int rc = -1;
  PyTypeObject* src = Py_TYPE(as_tensor(tensor)->carrier);
  PyTypeObject* dst = Py_TYPE(dest);
  if (!r) {
    // prepare's own exception is raised from move_async unchanged.
  } else if (is_record(r, kPrepared)) {
    *prepared = Py_NewRef(r);
    rc = 1;
  } else if (is_record(r, kUnsupported)) {
    PyObject *ss, *ds;
    if (observe(src, &ss) == 0 && observe(dst, &ds) == 0) {
      if (allow_fallback && fallback_permitted(ss, ds)) {
        rc = 2;
      } else if (!allow_fallback) {
        PyErr_Format(PyExc_NotImplementedError,
                     "transfer route %R cannot move this %s tensor to %s: %U; an explicit operation instance "
                     "performs only its route",
                     as_record(route)->f[R_ID], tname(src), tname(dst), as_record(r)->f[0]);
      } else {
        PyErr_Format(PyExc_NotImplementedError,
                     "transfer route %R cannot move this %s tensor to %s: %U; the elementwise fallback is not "
                     "permitted (%s %s; %s %s)",
                     as_record(route)->f[R_ID], tname(src), tname(dst), as_record(r)->f[0], tname(src),
                     permits(ss), tname(dst), permits(ds));
      }
    }
  } else {
    PyErr_Format(PyExc_TypeError, "transfer route %R: prepare() must return a PreparedTransfer or Unsupported, not %.100s",
                 as_record(route)->f[R_ID], oname(r));
  }
  Py_XDECREF(r);
  Py_DECREF(route);
  return rc;
}

// A valid ProviderCompletion: a bool done, a callable wait, no __await__.
int check_completion(PyObject* c) {
  PyObject* done = PyObject_GetAttrString(c, "done");
  if (!done) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s has no done attribute",
                 oname(c));
    return -1;
  }
  const bool is_bool = PyBool_Check(done);
  Py_DECREF(done);
  if (!is_bool) {
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s.done must be a bool",
                 oname(c));
    return -1;
  }
  PyObject* wait = PyObject_GetAttrString(c, "wait");
  if (!wait) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
  }
  const bool callable = wait && PyCallable_Check(wait);
  Py_XDECREF(wait);
  if (!callable) {
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s has no callable wait()",
                 oname(c));
    return -1;
  }
  int has_await = PyObject_HasAttrString(c, "__await__");
  if (has_await) {
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s defines __await__, "
                 "and a completion must be waited on with wait(), not awaited",
                 oname(c));
    return -1;
  }
  return 0;
}

int hook_submit(PyObject* prepared, PyObject** completion) {
  *completion = nullptr;
  PyObject* r = PyObject_CallNoArgs(as_record(prepared)->f[0]);
  if (!r) return -1;
  if (r == Py_None) {
    Py_DECREF(r);
    return 0;
  }
  if (check_completion(r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  *completion = r;
  return 1;
}

int hook_wait(PyObject* completion) {
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  PyObject* r = PyObject_CallMethod(completion, "wait", nullptr);
  set_grad_enabled(prev);
  if (!r) return -1;
  const bool none = r == Py_None;
  Py_DECREF(r);
  if (!none) {
    PyErr_Format(PyExc_TypeError, "%.100s.wait() must return None", oname(completion));
    return -1;
  }
  return 0;
}

// ------------------------------------------------------------ route operations

PyObject* RouteMove_copy(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError,
               "%s performs its transfer through its TransferProvider; it has no _copy", oname(self));
  return nullptr;
}

PyMethodDef RouteMove_methods[] = {
    {"_copy", RouteMove_copy, METH_VARARGS, "Not used: a route move runs its TransferProvider."},
    {nullptr, nullptr, 0, nullptr}};

// The MoveOperation subclass that performs route (pins: its exact pair).
PyObject* make_route_class(PyObject* route) {
  PyObject** f = as_record(route)->f;
  PyObject* name = PyUnicode_FromFormat("TransferRoute[%U]", f[R_ID]);
  PyObject* dict = name ? Py_BuildValue("{s:O,s:O,s:O,s:O,s:s,s:s}", "route", route, "route_id", f[R_ID],
                                        "source_class", f[R_SOURCE], "destination_class", f[R_DEST], "__module__",
                                        "strideweave.carriers.extension", "__doc__",
                                        "Performs one TransferRoute of a CarrierDefinition.")
                        : nullptr;
  PyObject* cls = dict ? PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "O(O)O", name,
                                               reinterpret_cast<PyObject*>(&RouteMove_Type), dict)
                       : nullptr;
  Py_XDECREF(dict);
  Py_XDECREF(name);
  return cls;
}

// ------------------------------------------------------------ register_carrier_definition

// A class whose storage is a built-in's (a built-in, or a subclass of one).
bool builtin_storage(PyTypeObject* cls) {
  if (!is_heap(cls)) return true;
  PyObject* mro = cls->tp_mro;
  for (Py_ssize_t k = 0; mro && k < PyTuple_GET_SIZE(mro); ++k) {
    auto* c = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, k));
    if (!is_heap(c)) return c != &Carrier_Type;
  }
  return true;
}

PyObject* mod_register_definition(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"cls", "definition", nullptr};
  PyObject *cls_obj, *def;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:register_carrier_definition", const_cast<char**>(kwlist),
                                   &cls_obj, &def))
    return nullptr;
  if (!is_carrier_class(cls_obj)) {
    PyErr_Format(PyExc_TypeError, "register_carrier_definition() cls must be a Carrier subclass, not %R", cls_obj);
    return nullptr;
  }
  auto* cls = reinterpret_cast<PyTypeObject*>(cls_obj);
  if (builtin_storage(cls)) {
    PyErr_Format(PyExc_TypeError,
                 "%s is a built-in carrier (or derives its storage from one) and cannot have a CarrierDefinition; "
                 "define a Python subclass of Carrier",
                 tname(cls));
    return nullptr;
  }
  if (!is_record(def, kDefinition)) {
    PyErr_Format(PyExc_TypeError, "register_carrier_definition() definition must be a CarrierDefinition, not %.100s",
                 oname(def));
    return nullptr;
  }
  PyObject* routes = as_record(def)->f[D_TRANSFERS];
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(routes); ++i) {
    PyObject* r = PyTuple_GET_ITEM(routes, i);
    if (as_record(r)->f[R_SOURCE] != cls_obj) {
      PyErr_Format(PyExc_TypeError, "TransferRoute %R has source_class %s; every route of %s's definition must name %s",
                   as_record(r)->f[R_ID], tname(reinterpret_cast<PyTypeObject*>(as_record(r)->f[R_SOURCE])),
                   tname(cls), tname(cls));
      return nullptr;
    }
  }
  int has = PyDict_Contains(g_definitions, cls_obj);
  if (has < 0) return nullptr;
  if (has) {
    PyErr_Format(PyExc_TypeError, "%s already has a CarrierDefinition; a class is registered once", tname(cls));
    return nullptr;
  }
  int seen = PyDict_Contains(g_observed, cls_obj);
  if (seen < 0) return nullptr;
  if (seen) {
    PyErr_Format(PyExc_TypeError,
                 "%s has already been observed (an instance was built, a move route resolved, or a legacy registry "
                 "call named it); register its CarrierDefinition before first use",
                 tname(cls));
    return nullptr;
  }
  // Build every route class first, so a failure registers nothing.
  const Py_ssize_t n = PyTuple_GET_SIZE(routes);
  PyObject* classes = PyTuple_New(n);
  if (!classes) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* c = make_route_class(PyTuple_GET_ITEM(routes, i));
    if (!c) {
      Py_DECREF(classes);
      return nullptr;
    }
    PyTuple_SET_ITEM(classes, i, c);
  }
  PyObject* keys = PyList_New(0);
  bool ok = keys != nullptr;
  for (Py_ssize_t i = 0; ok && i < n; ++i) {
    PyObject* r = PyTuple_GET_ITEM(routes, i);
    PyObject* key = PyTuple_Pack(2, as_record(r)->f[R_SOURCE], as_record(r)->f[R_DEST]);
    ok = key && PyList_Append(keys, key) == 0 && PyDict_SetItem(g_routes, key, PyTuple_GET_ITEM(classes, i)) == 0 &&
         PyDict_SetItem(g_route_of, PyTuple_GET_ITEM(classes, i), r) == 0;
    Py_XDECREF(key);
  }
  ok = ok && PyDict_SetItem(g_definitions, cls_obj, def) == 0;
  if (!ok) {
    // Undo the partial registration (memory failure only).
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (Py_ssize_t i = 0; keys && i < PyList_GET_SIZE(keys); ++i)
      if (PyDict_DelItem(g_routes, PyList_GET_ITEM(keys, i)) < 0) PyErr_Clear();
    for (Py_ssize_t i = 0; i < n; ++i)
      if (PyDict_DelItem(g_route_of, PyTuple_GET_ITEM(classes, i)) < 0) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
  }
  Py_XDECREF(keys);
  Py_DECREF(classes);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"register_carrier_definition",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_register_definition)),
     METH_VARARGS | METH_KEYWORDS,
     "register_carrier_definition(cls, definition)\n--\n\nGive the Python Carrier subclass cls its storage and "
     "outgoing transfer routes. Every route's source_class must be cls. A class is registered at most once and "
     "only before it is observed (an instance built, a route resolved, or a legacy registry call naming it); "
     "built-in carriers cannot be registered. Instances are then built as cls(slots, *, dtype, mutable=True)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// ------------------------------------------------------------ carrier.cpp entry points

int extension_observe_class(PyTypeObject* type) {
  if (!g_observed) return 0;
  PyObject* s;
  if (observe(type, &s) < 0) return -1;
  return s ? 1 : 0;
}

int extension_carrier_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"slots", "dtype", "mutable", nullptr};
  PyObject* slots;
  PyObject* dtype = nullptr;
  int mutable_ = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$Op:__init__", const_cast<char**>(kw), &slots, &dtype, &mutable_))
    return -1;
  CarrierObject* o = as_carrier(self);
  const char* name = oname(self);
  if (o->vt || o->released) {
    PyErr_Format(PyExc_RuntimeError, "%s.__init__() cannot be called twice", name);
    return -1;
  }
  if (!dtype) {
    PyErr_Format(PyExc_TypeError, "%s() missing required keyword-only argument 'dtype'", name);
    return -1;
  }
  if (PyBool_Check(slots) || !PyIndex_Check(slots)) {
    PyErr_Format(PyExc_TypeError, "%s() slots must be an int, not %.100s", name, oname(slots));
    return -1;
  }
  Py_ssize_t n = PyNumber_AsSsize_t(slots, PyExc_OverflowError);
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "%s() slots must be non-negative", name);
    return -1;
  }
  if (!is_dtype(dtype)) {
    PyErr_Format(PyExc_TypeError, "%s() dtype must be a DType, not %.100s", name, oname(dtype));
    return -1;
  }
  const int idx = code_index(dtype_code(dtype));
  if (idx < 0) {
    PyErr_Format(PyExc_ValueError, "%s() dtype %R cannot be a storage dtype", name, dtype);
    return -1;
  }
  PyObject* storage = nullptr;
  if (observe(Py_TYPE(self), &storage) < 0) return -1;
  if (!storage) {
    PyErr_Format(PyExc_TypeError, "%s has no CarrierDefinition", name);
    return -1;
  }
  PyObject* args2[2] = {self, dtype};
  PyObject* ok = PyObject_Vectorcall(as_record(storage)->f[S_SUPPORTS], args2, 2, nullptr);
  if (!ok) return -1;
  const bool is_bool = PyBool_Check(ok);
  const bool supported = ok == Py_True;
  Py_DECREF(ok);
  if (!is_bool) {
    PyErr_Format(PyExc_TypeError, "%s StorageProvider.supports_dtype() must return a bool", name);
    return -1;
  }
  if (!supported) {
    PyErr_Format(PyExc_ValueError, "%s does not support dtype %R", name, dtype);
    return -1;
  }
  o->vt = &kDefVT[idx];
  o->constructed_mutable = mutable_ != 0;
  if (allocate_slots(o, n) < 0) {
    o->vt = nullptr;  // unusable, and __init__ may be retried
    return -1;
  }
  return 0;
}

int extension_module_init(PyObject* module) {
  if (ready_records(module) < 0) return -1;
  ProviderCompletion_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  ProviderCompletion_Type.tp_doc =
      "Open base of the objects PreparedTransfer.submit() may return for a transfer that finishes later. Any "
      "object qualifies that has a bool done (True once finished) and a blocking wait() returning None (or "
      "raising the transfer's failure), and no __await__; subclasses provide both. A worker calls wait() and "
      "then performs the move's terminal commit.";
  ProviderCompletion_Type.tp_new = PyType_GenericNew;
  ProviderCompletion_Type.tp_methods = Completion_methods;
  if (add_type(module, &ProviderCompletion_Type, "ProviderCompletion") < 0) return -1;

  // GC flag, traverse, clear and dealloc are inherited from MoveOperation.
  RouteMove_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  RouteMove_Type.tp_doc =
      "Base of the per-route MoveOperation classes: each performs one TransferRoute (class attributes route, "
      "route_id and the exact source_class / destination_class pins).";
  RouteMove_Type.tp_base = &MoveOperation_Type;
  RouteMove_Type.tp_methods = RouteMove_methods;
  if (add_type(module, &RouteMove_Type, "_TransferRouteMoveOperation") < 0) return -1;

  g_definitions = PyDict_New();
  g_routes = PyDict_New();
  g_route_of = PyDict_New();
  g_observed = PyDict_New();
  if (!g_definitions || !g_routes || !g_route_of || !g_observed) return -1;
  if (PyModule_AddFunctions(module, module_methods) < 0) return -1;
  move_route_hooks.legacy_check = hook_legacy_check;
  move_route_hooks.resolve = hook_resolve;
  move_route_hooks.prepare = hook_prepare;
  move_route_hooks.submit = hook_submit;
  move_route_hooks.wait = hook_wait;
  return 0;
}

}  // namespace swpy

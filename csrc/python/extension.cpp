// Carrier extension: definition-backed Python carriers and their exact
// transfer routes.
//
// The records (StorageProvider, TransferRoute, CarrierDefinition, ...) are
// frozen dataclasses defined in the Python package (carriers/extension.py); importing
// that module hands them to _install_extension_records, which keeps them in
// the module state below (the C side builds TransferRequests and checks
// prepare() results with them). The registry is process-global and sealed
// per class: a class is registered at most once and only before it is
// observed (an instance built, a route resolved, a legacy registry call
// naming it); observing a class observes its Python bases too, so a
// definition can never change how an already-seen class stores or moves its
// values.
//
// Definitions are exact-class: a subclass of a defined class without its own
// definition cannot be built, and is definition-free everywhere else.
//
// Storage (extension/storage.cpp): a definition-backed instance gets one of
// the provider vtables (one per storage dtype, so the dtype needs no
// per-instance field); carrier.cpp then drives its slots through the
// provider like any built-in.
//
// Movement: move.cpp resolves each exact pair through move_route_hooks. A
// route (outgoing, or incoming from a definition-free source) is performed by
// a per-route MoveOperation subclass; move.cpp calls the prepare hook after
// every validation (TransferProvider.prepare, grad mode off), the submit hook
// on the calling thread (PreparedTransfer.submit) and, for a returned
// ProviderCompletion, the wait hook on a worker, then the same terminal
// commit as every other move. Framework-owned transfers (move_lowered:
// Evictable tiers) call the route class's _copy, which runs the same three
// steps synchronously.
#include <cstddef>
#include <vector>

#include "carriers/registry.hpp"
#include "extension/extension.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "extension/extension_api.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "util/args.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

const char* tname(PyTypeObject* t) { return type_name(t); }
const char* oname(PyObject* o) { return type_name(o); }
PyTypeObject* as_type(PyObject* o) { return reinterpret_cast<PyTypeObject*>(o); }
PyObject* as_obj(PyTypeObject* t) { return reinterpret_cast<PyObject*>(t); }

bool is_carrier_class(PyObject* o) { return PyType_Check(o) && PyType_IsSubtype(as_type(o), &Carrier_Type); }

using ext::field;
using ext::g;
using ext::observe;
using Storage = sw::ext::Storage;

sw::ext::Registry& registry() { return g.registry; }

bool is_heap(PyTypeObject* t) { return (t->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0; }
// A class that may have a definition: a Python class, or a built-in defined
// natively (extension_define_native).
bool definable(PyTypeObject* t) { return is_heap(t) || registry().defined(t); }

// cls followed by its Python bases in MRO order, up to the first built-in.
std::vector<sw::ext::ClassKey> heap_mro(PyTypeObject* cls) {
  std::vector<sw::ext::ClassKey> out;
  PyObject* mro = cls->tp_mro;
  for (Py_ssize_t k = 0; mro && k < PyTuple_GET_SIZE(mro); ++k) {
    PyObject* c = PyTuple_GET_ITEM(mro, k);
    if (!is_heap(as_type(c))) break;
    out.push_back(c);
  }
  return out;
}

// g.observed maps id(cls) -> weak reference to cls. Observing a class must
// not keep it alive (a program creating classes would grow without bound),
// so the weak reference's callback forgets the class when it dies, before
// its address can be reused.
PyObject* forget_observed(PyObject* key, PyObject*) {
  registry().forget(PyLong_AsVoidPtr(key));
  if (PyErr_Occurred()) PyErr_Clear();
  if (g.observed && PyDict_DelItem(g.observed, key) < 0) PyErr_Clear();
  Py_RETURN_NONE;
}

PyMethodDef forget_observed_def = {"_forget_observed_class", forget_observed, METH_O, nullptr};

int watch(sw::ext::ClassKey cls) {
  PyObject* c = const_cast<PyObject*>(static_cast<const PyObject*>(cls));
  Ref key = Ref::steal(PyLong_FromVoidPtr(c));
  Ref callback = key ? Ref::steal(PyCFunction_New(&forget_observed_def, key.get())) : Ref();
  Ref ref = callback ? Ref::steal(PyWeakref_NewRef(c, callback.get())) : Ref();
  if (!ref) return -1;
  return PyDict_SetItem(g.observed, key.get(), ref.get());
}

// Observes cls and every Python base (sealing them); *storage is cls's own
// storage or NULL when it is definition-free. 0 / -1.
int observe_storage(PyTypeObject* cls, const Storage** storage) {
  *storage = nullptr;
  if (registry().lookup(cls, storage)) return 0;
  if (!is_heap(cls)) return 0;  // built-ins have none (unless defined natively: looked up above)
  std::vector<sw::ext::ClassKey> newly;
  if (engine_call([&] { *storage = registry().observe(heap_mro(cls), &newly); }) < 0) return -1;
  for (size_t i = 0; i < newly.size(); ++i) {
    if (watch(newly[i]) < 0) {
      // Unwatched classes must not stay observed: their death would go unseen.
      for (size_t j = i; j < newly.size(); ++j) registry().forget(newly[j]);
      return -1;
    }
  }
  return 0;
}

const char* permits(const Storage* storage) { return sw::ext::fallback_stance(storage); }


// The record classes, which the Python package's extension module hands
// over when `import strideweave` imports it (the native core imports nothing
// from the Python package). 0 / -1.
int records_ready() {
  if (g.route_type) return 0;
  PyErr_SetString(PyExc_RuntimeError,
                  "the carrier extension records are not installed (`import strideweave` installs them)");
  return -1;
}

// getattr(o, name) as a new reference.

// ------------------------------------------------------------ _install_extension_records

PyObject* mod_install_records(PyObject* module, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"StorageProvider", "TransferProvider", "TransferRoute", "CarrierDefinition",
                             "TransferRequest", "PreparedTransfer", "Unsupported", "ProviderCompletion", nullptr};
  PyObject* t[8];
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O!O!O!O!O!O!O!O!:_install_extension_records",
                                   const_cast<char**>(kw), &PyType_Type, &t[0], &PyType_Type, &t[1], &PyType_Type,
                                   &t[2], &PyType_Type, &t[3], &PyType_Type, &t[4], &PyType_Type, &t[5],
                                   &PyType_Type, &t[6], &PyType_Type, &t[7]))
    return nullptr;
  if (PyTuple_GET_SIZE(args) != 0 || !kwargs || PyDict_GET_SIZE(kwargs) != 8) {
    PyErr_SetString(PyExc_TypeError, "_install_extension_records() needs all eight record classes");
    return nullptr;
  }
  if (g.route_type) {
    PyErr_SetString(PyExc_RuntimeError, "the extension records are installed once");
    return nullptr;
  }
  for (int i = 0; i < 8; ++i)
    if (PyModule_AddObjectRef(module, kw[i], t[i]) < 0) return nullptr;
  PyObject** slots[] = {&g.storage_type,  &g.transfer_provider_type, &g.route_type,       &g.definition_type,
                        &g.request_type,  &g.prepared_type,          &g.unsupported_type};
  for (int i = 0; i < 7; ++i) *slots[i] = Py_NewRef(t[i]);
  Py_RETURN_NONE;
}

// ------------------------------------------------------------ registry

PyTypeObject RouteMove_Type = static_type("strideweave._core._TransferRouteMoveOperation", sizeof(MoveOperationObject));

// ------------------------------------------------------------ route hooks

int hook_legacy_check(PyTypeObject* src, PyTypeObject* dst) {
  if (!definable(src) && !definable(dst)) return 0;
  const Storage *ss, *ds;
  if (observe_storage(src, &ss) < 0 || observe_storage(dst, &ds) < 0) return -1;
  if (!ss && !ds) return 0;
  PyTypeObject* defined = ss ? src : dst;
  PyErr_Format(PyExc_RuntimeError,
               "the legacy move registry does not govern (%s, %s): %s is definition-backed; express its movement "
               "with a TransferRoute in its CarrierDefinition",
               tname(src), tname(dst), tname(defined));
  return -1;
}

// Outgoing routes of a defined source and incoming routes of a defined
// destination (from a definition-free source) share the routes table: at
// most one of them can exist for an exact pair, since registering an
// incoming route seals its source definition-free.
int hook_resolve(PyTypeObject* src, PyTypeObject* dst, PyObject** op_class) {
  *op_class = nullptr;
  if (!definable(src) && !definable(dst)) return 0;  // built-in pairs: the legacy registry
  const Storage *ss, *ds;
  if (observe_storage(src, &ss) < 0 || observe_storage(dst, &ds) < 0) return -1;
  if (!ss && !ds) return 0;
  if (sw::ext::Handle op = registry().route(src, dst)) {
    *op_class = Py_NewRef(const_cast<PyObject*>(static_cast<const PyObject*>(op)));
    return 1;
  }
  if (sw::ext::fallback_permitted(ss, ds)) {
    *op_class = Py_NewRef(as_obj(&ElementwiseMoveOperation_Type));
    return 1;
  }
  PyTypeObject* defined = ss ? src : dst;
  PyErr_Format(PyExc_NotImplementedError,
               "no transfer route moves %s to %s: %s declares no TransferRoute for this exact pair, and the "
               "elementwise fallback needs both classes to permit it (%s %s; %s %s)",
               tname(src), tname(dst), tname(defined), tname(src), permits(ss), tname(dst), permits(ds));
  return -1;
}

// A fresh TransferRequest for a validated move.
PyObject* make_request(PyObject* tensor, PyObject* dest, Py_ssize_t dest_offset) {
  if (records_ready() < 0) return nullptr;
  TensorObject* t = as_tensor(tensor);
  Ref span = Ref::steal(PyLong_FromLongLong(layout_of(t->layout).cosize()));
  Ref offset = span ? Ref::steal(PyLong_FromSsize_t(dest_offset)) : Ref();
  if (!offset) return nullptr;
  PyObject* args[8] = {tensor, dest, as_obj(Py_TYPE(t->carrier)), as_obj(Py_TYPE(dest)), t->dtype, t->layout,
                       span.get(), offset.get()};
  return PyObject_Vectorcall(g.request_type, args, 8, nullptr);
}

// What a route's prepare() returned.
enum class Prepared { Error, Ready, Declined };

// Runs route.provider.prepare(request) with grad mode off. Ready: *out is the
// PreparedTransfer; Declined: *out is the Unsupported. Both new references.
Prepared run_prepare(PyObject* route, PyObject* tensor, PyObject* dest, Py_ssize_t dest_offset, PyObject** out) {
  *out = nullptr;
  Ref provider = Ref::steal(field(route, g.name.provider));
  Ref prepare = provider ? Ref::steal(field(provider.get(), g.name.prepare)) : Ref();
  Ref request = prepare ? Ref::steal(make_request(tensor, dest, dest_offset)) : Ref();
  if (!request) return Prepared::Error;
  Ref r;
  {
    NoGrad no_grad;
    r = Ref::steal(PyObject_CallOneArg(prepare.get(), request.get()));
  }
  if (!r) return Prepared::Error;  // prepare's own exception, unchanged
  int ready = PyObject_IsInstance(r.get(), g.prepared_type);
  int declined = ready == 0 ? PyObject_IsInstance(r.get(), g.unsupported_type) : 0;
  if (ready < 0 || declined < 0) return Prepared::Error;
  if (!ready && !declined) {
    Ref rid = Ref::steal(field(route, g.name.route_id));
    if (rid)
      PyErr_Format(PyExc_TypeError,
                   "transfer route %R: prepare() must return a PreparedTransfer or Unsupported, not %.100s",
                   rid.get(), oname(r.get()));
    return Prepared::Error;
  }
  *out = r.release();
  return ready ? Prepared::Ready : Prepared::Declined;
}

// NotImplementedError for a declined route (Unsupported u) without a
// permitted fallback.
void raise_declined(PyObject* route, PyObject* u, PyTypeObject* src, PyTypeObject* dst, bool fallback_considered,
                    const Storage* ss, const Storage* ds) {
  Ref rid = Ref::steal(field(route, g.name.route_id));
  Ref reason = rid ? Ref::steal(field(u, g.name.reason)) : Ref();
  if (!reason) return;
  if (!fallback_considered) {
    PyErr_Format(PyExc_NotImplementedError,
                 "transfer route %R cannot move this %s tensor to %s: %U; an explicit operation instance performs "
                 "only its route",
                 rid.get(), tname(src), tname(dst), reason.get());
  } else {
    PyErr_Format(PyExc_NotImplementedError,
                 "transfer route %R cannot move this %s tensor to %s: %U; the elementwise fallback is not permitted "
                 "(%s %s; %s %s)",
                 rid.get(), tname(src), tname(dst), reason.get(), tname(src), permits(ss), tname(dst), permits(ds));
  }
}

int hook_prepare(PyObject* op_class, PyObject* tensor, PyObject* dest, Py_ssize_t dest_offset, bool allow_fallback,
                 PyObject** prepared) {
  *prepared = nullptr;
  Ref route = Ref::borrow(PyDict_GetItemWithError(g.route_of, op_class));
  if (!route) return PyErr_Occurred() ? -1 : 0;
  PyObject* out;
  Prepared p = run_prepare(route.get(), tensor, dest, dest_offset, &out);
  if (p == Prepared::Error) return -1;
  Ref r = Ref::steal(out);
  if (p == Prepared::Ready) {
    *prepared = r.release();
    return 1;
  }
  PyTypeObject* src = Py_TYPE(as_tensor(tensor)->carrier);
  PyTypeObject* dst = Py_TYPE(dest);
  const Storage *ss, *ds;
  if (observe_storage(src, &ss) < 0 || observe_storage(dst, &ds) < 0) return -1;
  if (allow_fallback && sw::ext::fallback_permitted(ss, ds)) return 2;
  raise_declined(route.get(), r.get(), src, dst, allow_fallback, ss, ds);
  return -1;
}

// A valid ProviderCompletion: a bool done, a callable wait, no __await__.
int check_completion(PyObject* c) {
  Ref done = Ref::steal(PyObject_GetAttrString(c, "done"));
  if (!done) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s has no done attribute",
                 oname(c));
    return -1;
  }
  if (!PyBool_Check(done.get())) {
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s.done must be a bool",
                 oname(c));
    return -1;
  }
  Ref wait = Ref::steal(PyObject_GetAttr(c, g.name.wait));
  if (!wait) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
  }
  if (!wait || !PyCallable_Check(wait.get())) {
    PyErr_Format(PyExc_TypeError,
                 "PreparedTransfer.submit() must return None or a ProviderCompletion; %.100s has no callable wait()",
                 oname(c));
    return -1;
  }
  if (PyObject_HasAttrString(c, "__await__")) {
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
  Ref submit = Ref::steal(field(prepared, g.name.submit));
  Ref r = submit ? Ref::steal(PyObject_CallNoArgs(submit.get())) : Ref();
  if (!r) return -1;
  if (r.get() == Py_None) return 0;
  if (check_completion(r.get()) < 0) return -1;
  *completion = r.release();
  return 1;
}

int hook_wait(PyObject* completion) {
  Ref r;
  {
    NoGrad no_grad;
    r = Ref::steal(PyObject_CallMethodNoArgs(completion, g.name.wait));
  }
  if (!r) return -1;
  if (r.get() != Py_None) {
    PyErr_Format(PyExc_TypeError, "%.100s.wait() must return None", oname(completion));
    return -1;
  }
  return 0;
}

// ------------------------------------------------------------ route operations

// _copy of a route class: a framework-owned transfer (move_lowered, for
// Evictable tiers) runs the route synchronously on this thread: prepare,
// submit, then the completion's wait(); a declined route falls back to the
// elementwise copy when both classes permit it. move_async never calls it
// (it drives the same steps through the hooks).
PyObject* RouteMove_copy(PyObject* self, PyObject* args) {
  PyObject *tensor, *dest, *output;
  Py_ssize_t count;
  if (!PyArg_ParseTuple(args, "O!O!OO&:_copy", &Tensor_Type, &tensor, &Carrier_Type, &dest, &output, count_arg, &count))
    return nullptr;
  if (tensor_reject_multi(tensor, "move") < 0 || move_check_dtype(tensor, dest) < 0) return nullptr;
  Ref route = Ref::borrow(PyDict_GetItemWithError(g.route_of, as_obj(Py_TYPE(self))));
  if (!route) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "%s is not the operation of a registered TransferRoute", oname(self));
    return nullptr;
  }
  // (output names where the span lands: a framework transfer may write into
  // the middle of the destination)
  Py_ssize_t dest_offset = 0;
  if (is_tensor(output) && as_tensor(output)->carrier == dest) dest_offset = as_tensor(output)->offset;
  PyObject* out;
  Prepared p = run_prepare(route.get(), tensor, dest, dest_offset, &out);
  if (p == Prepared::Error) return nullptr;
  Ref r = Ref::steal(out);
  if (p == Prepared::Declined) {
    PyTypeObject* src = Py_TYPE(as_tensor(tensor)->carrier);
    const Storage *ss, *ds;
    if (observe_storage(src, &ss) < 0 || observe_storage(Py_TYPE(dest), &ds) < 0) return nullptr;
    if (!sw::ext::fallback_permitted(ss, ds)) {
      raise_declined(route.get(), r.get(), src, Py_TYPE(dest), true, ss, ds);
      return nullptr;
    }
    Ref fallback = Ref::steal(PyObject_CallNoArgs(as_obj(&ElementwiseMoveOperation_Type)));
    if (!fallback) return nullptr;
    return PyObject_CallMethod(fallback.get(), "_copy", "OOOn", tensor, dest, output, count);
  }
  PyObject* completion;
  int s;
  {
    NoGrad no_grad;
    s = hook_submit(r.get(), &completion);
  }
  if (s < 0) return nullptr;
  Ref c = Ref::steal(completion);
  if (s == 1 && hook_wait(c.get()) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef RouteMove_methods[] = {
    {"_copy", RouteMove_copy, METH_VARARGS,
     "_copy(tensor, destination, output, element_count): runs the route synchronously (prepare, submit, wait); "
     "used by framework-owned transfers such as Evictable eviction and promotion."},
    {nullptr, nullptr, 0, nullptr}};

// The MoveOperation subclass that performs route (pins: its exact pair).
PyObject* make_route_class(PyObject* route) {
  Ref rid = Ref::steal(field(route, g.name.route_id));
  Ref src = rid ? Ref::steal(field(route, g.name.source_class)) : Ref();
  Ref dst = src ? Ref::steal(field(route, g.name.destination_class)) : Ref();
  Ref name = dst ? Ref::steal(PyUnicode_FromFormat("TransferRoute[%U]", rid.get())) : Ref();
  // The class lives beside the records: the module of the route's class.
  Ref module = name ? Ref::steal(PyObject_GetAttrString(as_obj(Py_TYPE(route)), "__module__")) : Ref();
  Ref dict = module ? Ref::steal(Py_BuildValue("{s:O,s:O,s:O,s:O,s:O,s:s}", "route", route, "route_id", rid.get(),
                                               "source_class", src.get(), "destination_class", dst.get(),
                                               "__module__", module.get(), "__doc__",
                                               "Performs one TransferRoute of a CarrierDefinition."))
                    : Ref();
  if (!dict) return nullptr;
  return PyObject_CallFunction(as_obj(&PyType_Type), "O(O)O", name.get(), as_obj(&RouteMove_Type), dict.get());
}

// ------------------------------------------------------------ register_carrier_definition

// A class whose storage is a built-in's (a built-in, or a subclass of one).
bool builtin_storage(PyTypeObject* cls) {
  if (!is_heap(cls)) return true;
  PyObject* mro = cls->tp_mro;
  for (Py_ssize_t k = 0; mro && k < PyTuple_GET_SIZE(mro); ++k) {
    PyTypeObject* c = as_type(PyTuple_GET_ITEM(mro, k));
    if (!is_heap(c)) return c != &Carrier_Type;
  }
  return true;
}

// Checks that route belongs to cls's definition: outgoing (source_class is
// cls) or incoming (destination_class is cls, from a definition-free class).
// *incoming_source receives the source class of an incoming route (borrowed
// from route, which the caller keeps alive), else NULL. 0 / -1.
int check_route_owner(PyObject* route, PyTypeObject* cls, PyObject** incoming_source) {
  *incoming_source = nullptr;
  Ref src = Ref::steal(field(route, g.name.source_class));
  Ref dst = src ? Ref::steal(field(route, g.name.destination_class)) : Ref();
  Ref rid = dst ? Ref::steal(field(route, g.name.route_id)) : Ref();
  if (!rid) return -1;
  switch (registry().route_owner(cls, src.get(), dst.get())) {
    case sw::ext::RouteOwner::Outgoing:
      return 0;
    case sw::ext::RouteOwner::Incoming:
      *incoming_source = src.get();
      return 0;
    case sw::ext::RouteOwner::Foreign:
    PyErr_Format(PyExc_TypeError,
                 "TransferRoute %R has source_class %s and destination_class %s; every route of %s's definition "
                 "must have source_class %s (outgoing) or destination_class %s (incoming)",
                   rid.get(), class_name(src.get()), class_name(dst.get()), tname(cls), tname(cls), tname(cls));
      return -1;
    case sw::ext::RouteOwner::IncomingFromDefined:
      PyErr_Format(PyExc_TypeError,
                 "incoming TransferRoute %R of %s has source_class %s, which is definition-backed; an incoming route "
                 "must come from a definition-free class (%s declares its own outgoing routes)",
                   rid.get(), tname(cls), class_name(src.get()), class_name(src.get()));
      return -1;
  }
  return -1;
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
  PyTypeObject* cls = as_type(cls_obj);
  if (builtin_storage(cls)) {
    PyErr_Format(PyExc_TypeError,
                 "%s is a built-in carrier (or derives its storage from one) and cannot have a CarrierDefinition; "
                 "define a Python subclass of Carrier",
                 tname(cls));
    return nullptr;
  }
  if (records_ready() < 0) return nullptr;
  int is_def = PyObject_IsInstance(def, g.definition_type);
  if (is_def < 0) return nullptr;
  if (!is_def) {
    PyErr_Format(PyExc_TypeError, "register_carrier_definition() definition must be a CarrierDefinition, not %.100s",
                 oname(def));
    return nullptr;
  }
  Ref routes = Ref::steal(field(def, g.name.transfers));
  if (!routes) return nullptr;
  if (!PyTuple_Check(routes.get())) {
    PyErr_SetString(PyExc_TypeError, "CarrierDefinition transfers must be a tuple");
    return nullptr;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(routes.get());
  Ref incoming = Ref::steal(PyList_New(0));  // definition-free sources to seal
  if (!incoming) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* source;
    if (check_route_owner(PyTuple_GET_ITEM(routes.get(), i), cls, &source) < 0) return nullptr;
    if (source && PyList_Append(incoming.get(), source) < 0) return nullptr;
  }
  switch (registry().registration_problem(cls)) {
    case sw::ext::RegistrationProblem::None:
      break;
    case sw::ext::RegistrationProblem::AlreadyDefined:
      PyErr_Format(PyExc_TypeError, "%s already has a CarrierDefinition; a class is registered once", tname(cls));
      return nullptr;
    case sw::ext::RegistrationProblem::AlreadyObserved:
      PyErr_Format(PyExc_TypeError,
                 "%s has already been observed (an instance was built, a move route resolved, or a legacy registry "
                   "call named it); register its CarrierDefinition before first use",
                   tname(cls));
      return nullptr;
  }
  Ref storage = Ref::steal(field(def, g.name.storage));
  Ref fallback = storage ? Ref::steal(field(storage.get(), g.name.elementwise_fallback)) : Ref();
  if (!fallback) return nullptr;
  // Build every route class first, so a failure registers nothing. The
  // routes (held by the route classes' entries) keep their classes alive.
  Ref classes = Ref::steal(PyTuple_New(n));
  if (!classes) return nullptr;
  std::vector<sw::ext::Route> table;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* r = PyTuple_GET_ITEM(routes.get(), i);
    PyObject* c = make_route_class(r);
    if (!c) return nullptr;
    PyTuple_SET_ITEM(classes.get(), i, c);
    Ref src = Ref::steal(field(r, g.name.source_class));
    Ref dst = src ? Ref::steal(field(r, g.name.destination_class)) : Ref();
    if (!dst || engine_call([&] { table.push_back({src.get(), dst.get(), c}); }) < 0) return nullptr;
  }
  // Seal the incoming routes' sources: they stay definition-free for good.
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(incoming.get()); ++i) {
    PyObject* ignored;
    if (observe(as_type(PyList_GET_ITEM(incoming.get(), i)), &ignored) < 0) return nullptr;
  }
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < n; ++i)
    ok = PyDict_SetItem(g.route_of, PyTuple_GET_ITEM(classes.get(), i), PyTuple_GET_ITEM(routes.get(), i)) == 0;
  ok = ok && PyDict_SetItem(g.definitions, cls_obj, storage.get()) == 0;
  ok = ok && engine_call([&] {
         registry().define(cls, Storage{storage.get(), fallback.get() == Py_True}, table);
       }) == 0;
  if (!ok) {
    // Undo the partial registration (memory failure only).
    ErrorGuard keep;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (PyDict_DelItem(g.route_of, PyTuple_GET_ITEM(classes.get(), i)) < 0) PyErr_Clear();
    if (PyDict_DelItem(g.definitions, cls_obj) < 0) PyErr_Clear();
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"register_carrier_definition",
     method_cast(mod_register_definition),
     METH_VARARGS | METH_KEYWORDS,
     "register_carrier_definition(cls, definition)\n--\n\nGive the Python Carrier subclass cls its storage and "
     "transfer routes. Every route's source_class must be cls (outgoing), or its destination_class cls and its "
     "source_class a definition-free class (incoming; that class is then sealed definition-free). A class is "
     "registered at most once and only before it is observed (an instance built, a route resolved, or a legacy "
     "registry call naming it); built-in carriers cannot be registered. Instances are then built as "
     "cls(slots, *, dtype, mutable=True)."},
    {"_install_extension_records",
     method_cast(mod_install_records),
     METH_VARARGS | METH_KEYWORDS,
     "Private: the Python package's extension module hands its record classes to _core (once, at import)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace



// Observes cls and every Python base (sealing them) and returns cls's own
// StorageProvider (borrowed) or NULL when cls is definition-free. 0 / -1.
int ext::observe(PyTypeObject* cls, PyObject** storage) {
  const Storage* s;
  if (observe_storage(cls, &s) < 0) return -1;
  *storage = s ? const_cast<PyObject*>(static_cast<const PyObject*>(s->provider)) : nullptr;
  return 0;
}

// ------------------------------------------------------------ carrier.cpp entry points

int extension_observe_class(PyTypeObject* type) {
  if (!g.observed) return 0;
  PyObject* s;
  if (observe(type, &s) < 0) return -1;
  if (s) return 1;
  // Definitions are exact-class: a subclass of a defined class needs its own.
  std::vector<sw::ext::ClassKey> mro;
  if (engine_call([&] { mro = heap_mro(type); }) < 0) return -1;
  if (auto* base = static_cast<PyTypeObject*>(const_cast<void*>(registry().defined_base(mro)))) {
    PyErr_Format(PyExc_TypeError,
                 "%s has no CarrierDefinition of its own (its base %s has one); definitions are exact-class, so "
                 "register one for %s to build instances",
                 tname(type), tname(base), tname(type));
    return -1;
  }
  return 0;
}

int extension_define_native(PyTypeObject* cls) {
  std::vector<sw::ext::ClassKey> newly;
  return engine_call([&] {
    // The handle is the class itself: nothing drives this class's storage
    // through a provider (its vtable is its own).
    registry().define(cls, Storage{cls, false}, {});
    registry().observe({cls}, &newly);
  });
}

int extension_module_init(PyObject* module) {
  // GC flag, traverse, clear and dealloc are inherited from MoveOperation.
  RouteMove_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  RouteMove_Type.tp_doc =
      "Base of the per-route MoveOperation classes: each performs one TransferRoute (class attributes route, "
      "route_id and the exact source_class / destination_class pins).";
  RouteMove_Type.tp_base = &MoveOperation_Type;
  RouteMove_Type.tp_methods = RouteMove_methods;
  if (add_type(module, &RouteMove_Type, "_TransferRouteMoveOperation") < 0) return -1;

  struct {
    PyObject** slot;
    const char* text;
  } names[] = {{&g.name.supports_dtype, "supports_dtype"},
               {&g.name.physical_size, "physical_size"},
               {&g.name.allocate, "allocate"},
               {&g.name.release, "release"},
               {&g.name.read, "read"},
               {&g.name.write, "write"},
               {&g.name.elementwise_fallback, "elementwise_fallback"},
               {&g.name.storage, "storage"},
               {&g.name.transfers, "transfers"},
               {&g.name.source_class, "source_class"},
               {&g.name.destination_class, "destination_class"},
               {&g.name.route_id, "route_id"},
               {&g.name.provider, "provider"},
               {&g.name.prepare, "prepare"},
               {&g.name.submit, "submit"},
               {&g.name.reason, "reason"},
               {&g.name.wait, "wait"}};
  for (auto& n : names)
    if (!(*n.slot = PyUnicode_InternFromString(n.text))) return -1;
  g.definitions = PyDict_New();
  g.route_of = PyDict_New();
  g.observed = PyDict_New();
  if (!g.definitions || !g.route_of || !g.observed) return -1;
  if (PyModule_AddFunctions(module, module_methods) < 0) return -1;
  move_route_hooks.legacy_check = hook_legacy_check;
  move_route_hooks.resolve = hook_resolve;
  move_route_hooks.prepare = hook_prepare;
  move_route_hooks.submit = hook_submit;
  move_route_hooks.wait = hook_wait;
  return 0;
}

}  // namespace swpy

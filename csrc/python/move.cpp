// Movement: move / move_async, the MoveOperation family, the legacy
// exact-pair registry, and the move autograd node.
//
// One primitive, move_async, validates in the spec's order, resolves the
// exact-pair operation (move_resolve_route: carrier-definition hooks, then
// the legacy registry, then ElementwiseMoveOperation), captures the reverse
// route for a differentiable move, claims ownership of both carriers,
// allocates an empty destination to layout.cosize, and submits the transfer
// to the engine executor. The worker runs the copy (native copies without
// the GIL; a Python-level _copy with the GIL, grad mode off and owner access
// to both carriers) and then, holding the GIL, performs the terminal commit
// exactly once: publish the result (and its autograd node), relinquish
// ownership, release the source, restore both versions (a move is not a
// write), record move.complete, then mark the handle done. A failure leaves
// the source live and unchanged and publishes nothing.
#include <atomic>
#include <chrono>
#include <functional>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "file_io.hpp"
#include "strided_copy.hpp"
#include "sw.hpp"

namespace swpy {

MoveRouteHooks move_route_hooks = {nullptr, nullptr};

namespace {

PyObject* g_registry = nullptr;  // dict: (src class, dst class) -> operation class
// The built-in _copy descriptors, to recognise operations whose copy can run
// natively without the GIL (a subclass that overrides _copy is not native).
PyObject* g_elementwise_copy = nullptr;
PyObject* g_bulk_copy_c2f = nullptr;
PyObject* g_bulk_copy_f2c = nullptr;

const char* tname(PyTypeObject* t) { return _PyType_Name(t); }
const char* oname(PyObject* o) { return _PyType_Name(Py_TYPE(o)); }
MoveOperationObject* as_move_op(PyObject* o) { return reinterpret_cast<MoveOperationObject*>(o); }

// ------------------------------------------------------------ in-flight moves
// Counted so interpreter exit can wait for pending moves (a dropped handle
// still completes) while the runtime they need is alive. A plain atomic (no
// lock) so a forked child can simply reset it: its parent's jobs never run
// there.
std::atomic<size_t> g_in_flight{0};

void flight_begin() { g_in_flight.fetch_add(1); }
void flight_end() { g_in_flight.fetch_sub(1); }

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// ------------------------------------------------------------ native access

// Item size of a carrier's storage dtype (0: not a native dtype).
int carrier_itemsize(PyObject* c) {
  PyObject* d = carrier_dtype(c);
  if (!d) {
    PyErr_Clear();
    return 0;
  }
  int n = sw::itemsize(dtype_code(d));
  Py_DECREF(d);
  return n;
}

bool no_value_hooks(PyObject* c) { return !carrier_overrides(c, "get_value") && !carrier_overrides(c, "set_value"); }

// Host memory of a native carrier whose slot hooks are not overridden.
char* native_host(PyObject* c) {
  void* p = carrier_host_data(c);
  if (!p || !no_value_hooks(c)) return nullptr;
  return static_cast<char*>(p);
}

// File storage of a live FileBacked carrier whose slot hooks are not overridden.
sw::FileStorage* native_file(PyObject* c) {
  if (!PyObject_TypeCheck(c, &FileBacked_Type) || carrier_is_released(c) || !no_value_hooks(c)) return nullptr;
  sw::FileStorage* f = &reinterpret_cast<FileBackedObject*>(c)->file;
  return f->is_open() ? f : nullptr;
}

// A copy planned under the GIL that runs without it. Throws std::system_error
// or std::bad_alloc.
using Plan = std::function<void()>;

// Whole-physical-span copy of count slots from src[src_off...] into
// dst[dst_off...] between host memory and files. 1 with *plan set, 0 when
// the pair is not native.
int span_plan(PyObject* src, Py_ssize_t src_off, PyObject* dst, Py_ssize_t dst_off, Py_ssize_t count, Plan* plan) {
  const int item = carrier_itemsize(src);
  if (item == 0 || item != carrier_itemsize(dst)) return 0;
  char* sh = native_host(src);
  char* dh = native_host(dst);
  sw::FileStorage* sf = sh ? nullptr : native_file(src);
  sw::FileStorage* df = dh ? nullptr : native_file(dst);
  if (sh && df) {
    const char* from = sh + src_off * item;
    *plan = [=] { sw::file_write_span(*df, dst_off, from, count, item); };
    return 1;
  }
  if (sf && dh) {
    char* to = dh + dst_off * item;
    *plan = [=] { sw::file_read_span(*sf, src_off, to, count, item); };
    return 1;
  }
  if (sf && df) {
    *plan = [=] { sw::file_copy_span(*sf, src_off, *df, dst_off, count, item); };
    return 1;
  }
  if (sh && dh) {
    char* to = dh + dst_off * item;
    const char* from = sh + src_off * item;
    *plan = [=] { sw::copy_span(to, from, count, item); };
    return 1;
  }
  return 0;
}

// Logical copy of every element of src_layout (read at src_off) into the
// same coordinates of dst_layout (at dst_off); the shapes match. Native for
// two host carriers of one item size; for files only when both layouts are
// the same (then the physical span is copied, holes included). 1 / 0 as
// span_plan.
int logical_plan(PyObject* src, Py_ssize_t src_off, const sw::Layout& sl, PyObject* dst, Py_ssize_t dst_off,
                 const sw::Layout& dl, Plan* plan) {
  const int item = carrier_itemsize(src);
  if (item == 0 || item != carrier_itemsize(dst)) return 0;
  char* sh = native_host(src);
  char* dh = native_host(dst);
  if (sh && dh) {
    if (sl == dl) {
      *plan = [=] { sw::strided_copy(dh, dst_off, sh, src_off, sl, item); };
    } else {
      std::vector<int64_t> ext, ss, ds;
      for (const auto& m : sl.leaves()) {
        ext.push_back(m.extent);
        ss.push_back(m.stride);
      }
      for (const auto& m : dl.leaves()) ds.push_back(m.stride);
      if (ds.size() != ss.size()) return 0;
      *plan = [=] { sw::strided_copy(dh, dst_off, ds, sh, src_off, ss, ext, item); };
    }
    return 1;
  }
  if (sl == dl) return span_plan(src, src_off, dst, dst_off, sl.cosize(), plan);
  return 0;
}

// Sets a Python exception for a failed native plan.
void raise_plan_error(const std::system_error& e) {
  PyObject* exc = PyObject_CallFunction(PyExc_OSError, "is", e.code().value(), e.what());
  if (exc) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
    Py_DECREF(exc);
  }
}

// What running a native plan produced. Engine exceptions never unwind into
// CPython or out of a worker: they become one of these, raised later with
// the GIL held.
struct PlanOutcome {
  bool failed = false;  // err holds the I/O failure
  bool nomem = false;
  std::system_error err{std::error_code{}};

  // Runs plan (no Python API: callable without the GIL).
  void run(const Plan& plan) {
    try {
      plan();
    } catch (const std::system_error& e) {
      failed = true;
      err = e;
    } catch (const std::bad_alloc&) {
      nomem = true;
    } catch (...) {  // reported as an I/O-class failure
      failed = true;
      err = std::system_error(std::make_error_code(std::errc::io_error), "unexpected engine error");
    }
  }
  // With the GIL: 0, or -1 with the matching exception set.
  int raise() const {
    if (nomem) {
      PyErr_NoMemory();
      return -1;
    }
    if (failed) {
      raise_plan_error(err);
      return -1;
    }
    return 0;
  }
};

// Runs a plan with the GIL released. 0 / -1.
int run_plan_unlocked(const Plan& plan) {
  PlanOutcome out;
  Py_BEGIN_ALLOW_THREADS
  out.run(plan);
  Py_END_ALLOW_THREADS
  return out.raise();
}

// Python-level logical copy through the carriers' slot entry points
// (framework writes: no mutability check, no version bump). Iterates both
// layouts' coordinates together; slots no coordinate reaches keep their
// values. The GIL is offered to other threads now and then so a long
// fallback copy does not starve them.
int elementwise_values(PyObject* src, Py_ssize_t src_off, const sw::Layout& sl, PyObject* dst, Py_ssize_t dst_off,
                       const sw::Layout& dl) {
  const auto& sleaves = sl.leaves();
  const auto& dleaves = dl.leaves();
  if (sleaves.size() != dleaves.size()) {
    PyErr_SetString(PyExc_ValueError, "source and destination layouts have different shapes");
    return -1;
  }
  const size_t n = sleaves.size();
  int64_t total = sl.size();
  std::vector<int64_t> coord(n, 0);
  int64_t si = 0, di = 0;
  for (int64_t ord = 0; ord < total; ++ord) {
    PyObject* v = carrier_get(src, src_off + si);
    if (!v) return -1;
    int r = carrier_set_unchecked(dst, dst_off + di, v);
    Py_DECREF(v);
    if (r < 0) return -1;
    if ((ord & 4095) == 4095) {
      Py_BEGIN_ALLOW_THREADS
      Py_END_ALLOW_THREADS
    }
    for (size_t d = 0; d < n; ++d) {
      if (++coord[d] < sleaves[d].extent) {
        si += sleaves[d].stride;
        di += dleaves[d].stride;
        break;
      }
      si -= sleaves[d].stride * (sleaves[d].extent - 1);
      di -= dleaves[d].stride * (dleaves[d].extent - 1);
      coord[d] = 0;
    }
  }
  return 0;
}

// Whether an empty carrier can grow to a move's span: exactly the carriers
// with a reserve hook (CPU and Evictable are fixed-size and have none, nor
// does a Python carrier without native storage or a definition).
bool can_grow(PyObject* c) {
  const CarrierVTable* vt = as_carrier(c)->vt;
  return vt && vt->reserve;
}

// ------------------------------------------------------------ registry

PyObject* pair_key(PyTypeObject* src, PyTypeObject* dst) {
  return PyTuple_Pack(2, reinterpret_cast<PyObject*>(src), reinterpret_cast<PyObject*>(dst));
}

bool is_carrier_class(PyObject* o) {
  return PyType_Check(o) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), &Carrier_Type);
}

bool is_move_op_class(PyObject* o) {
  return PyType_Check(o) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), &MoveOperation_Type);
}

int check_carrier_class(PyObject* o, const char* param) {
  if (is_carrier_class(o)) return 0;
  PyErr_Format(PyExc_TypeError, "%s must be a Carrier subclass, not %R", param, o);
  return -1;
}

// The argument checks shared by every legacy registry API.
int check_pair(PyObject* src, PyObject* dst) {
  if (check_carrier_class(src, "source_class") < 0 || check_carrier_class(dst, "destination_class") < 0) return -1;
  if (move_route_hooks.legacy_check &&
      move_route_hooks.legacy_check(reinterpret_cast<PyTypeObject*>(src), reinterpret_cast<PyTypeObject*>(dst)) < 0)
    return -1;
  return 0;
}

int check_op_class(PyObject* op) {
  if (is_move_op_class(op)) return 0;
  PyErr_Format(PyExc_TypeError, "operation_class must be a MoveOperation subclass, not %R", op);
  return -1;
}

// ValueError naming both classes (and the holder) when the exact pair has an
// entry; 0 when it is free.
int check_free(PyTypeObject* src, PyTypeObject* dst) {
  PyObject* key = pair_key(src, dst);
  if (!key) return -1;
  PyObject* existing = PyDict_GetItemWithError(g_registry, key);
  Py_DECREF(key);
  if (existing) {
    PyErr_Format(PyExc_ValueError,
                 "a move operation is already registered for (%s, %s): %s; unregister it first", tname(src),
                 tname(dst), tname(reinterpret_cast<PyTypeObject*>(existing)));
    return -1;
  }
  return PyErr_Occurred() ? -1 : 0;
}

int registry_add(PyTypeObject* src, PyTypeObject* dst, PyObject* op) {
  if (check_free(src, dst) < 0) return -1;
  PyObject* key = pair_key(src, dst);
  if (!key) return -1;
  int rc = PyDict_SetItem(g_registry, key, op);
  Py_DECREF(key);
  return rc;
}

// Removes the exact pair; new reference to the removed class, or NULL with
// KeyError naming both classes.
PyObject* registry_remove(PyTypeObject* src, PyTypeObject* dst) {
  PyObject* key = pair_key(src, dst);
  if (!key) return nullptr;
  PyObject* existing = PyDict_GetItemWithError(g_registry, key);
  PyObject* out = nullptr;
  if (existing) {
    out = Py_NewRef(existing);
    if (PyDict_DelItem(g_registry, key) < 0) Py_CLEAR(out);
  } else if (!PyErr_Occurred()) {
    PyObject* msg = PyUnicode_FromFormat("no move operation is registered for (%s, %s)", tname(src), tname(dst));
    if (msg) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
  }
  Py_DECREF(key);
  return out;
}

PyObject* registry_lookup(PyTypeObject* src, PyTypeObject* dst) {
  PyObject* key = pair_key(src, dst);
  if (!key) return nullptr;
  PyObject* op = PyDict_GetItemWithError(g_registry, key);
  Py_DECREF(key);
  if (op) return Py_NewRef(op);
  if (PyErr_Occurred()) return nullptr;
  return Py_NewRef(reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type));
}

// ------------------------------------------------------------ pins

// TypeError when op_class pins a carrier class the pair does not match.
int check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst) {
  static const char* const attrs[2] = {"source_class", "destination_class"};
  PyTypeObject* actual[2] = {src, dst};
  for (int k = 0; k < 2; ++k) {
    PyObject* pin = PyObject_GetAttrString(op_class, attrs[k]);
    if (!pin) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
      continue;
    }
    if (pin != Py_None && pin != reinterpret_cast<PyObject*>(actual[k])) {
      const char* role = k == 0 ? "source" : "destination";
      if (PyType_Check(pin))
        PyErr_Format(PyExc_TypeError, "%s requires %s carrier class %s, got %s",
                     tname(reinterpret_cast<PyTypeObject*>(op_class)), role,
                     tname(reinterpret_cast<PyTypeObject*>(pin)), tname(actual[k]));
      else
        PyErr_Format(PyExc_TypeError, "%s.%s must be a Carrier class or None, not %R",
                     tname(reinterpret_cast<PyTypeObject*>(op_class)), attrs[k], pin);
      Py_DECREF(pin);
      return -1;
    }
    Py_DECREF(pin);
  }
  return 0;
}

// ------------------------------------------------------------ move jobs

// Provider: a carrier-definition route whose submit() returned a
// ProviderCompletion; the worker waits on it (extension.cpp hooks).
enum class CopyKind { Native, Python, Provider };

// One submitted move. Owned by the worker job; every PyObject is a strong
// reference released at the end of the terminal commit, under the GIL.
struct MoveJob {
  PyObject* op = nullptr;       // MoveOperation instance (the autograd node)
  PyObject* tensor = nullptr;   // source Tensor
  PyObject* source = nullptr;   // its carrier
  PyObject* dest = nullptr;     // destination carrier
  PyObject* output = nullptr;   // result Tensor (published on success)
  PyObject* handle = nullptr;   // AwaitMove
  PyObject* session = nullptr;  // profiler session or NULL
  PyObject* shapes = nullptr;   // (shape,) for profiling
  PyObject* completion = nullptr;  // ProviderCompletion (CopyKind::Provider)
  int64_t src_token = 0, dst_token = 0;
  uint64_t src_version = 0, dst_version = 0;
  Py_ssize_t count = 0;  // layout cosize
  bool record_node = false;
  CopyKind kind = CopyKind::Python;
  Plan plan;
  int64_t submit_id = 0;
  int64_t transfer_start_ns = 0;

  void drop_refs() {
    Py_CLEAR(op);
    Py_CLEAR(tensor);
    Py_CLEAR(source);
    Py_CLEAR(dest);
    Py_CLEAR(output);
    Py_CLEAR(handle);
    Py_CLEAR(session);
    Py_CLEAR(shapes);
    Py_CLEAR(completion);
  }
};

// Gives back ownership of both carriers. Keeps a pending exception.
void relinquish_both(MoveJob* j) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (j->src_token && carrier_relinquish(j->source, j->src_token) < 0) PyErr_Clear();
  if (j->dst_token && carrier_relinquish(j->dest, j->dst_token) < 0) PyErr_Clear();
  j->src_token = j->dst_token = 0;
  PyErr_Restore(et, ev, tb);
}

void restore_versions(MoveJob* j) {
  as_carrier(j->source)->version = j->src_version;
  as_carrier(j->dest)->version = j->dst_version;
}

// Records move.complete; keeps a pending exception.
void record_complete(MoveJob* j, bool ok) {
  if (!j->session) return;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  const int64_t now = sw::now_ns();
  if (profiler_record(j->session, profiler_new_id(j->session), j->submit_id, "move.complete",
                      reinterpret_cast<PyObject*>(Py_TYPE(j->source)), reinterpret_cast<PyObject*>(Py_TYPE(j->op)),
                      j->shapes, j->transfer_start_ns, now - j->transfer_start_ns, current_thread_id(), ok) < 0)
    PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

// Attaches the move node: inputs() is (source,), with its version token.
int attach_node(MoveJob* j) {
  PyObject* inputs = PyTuple_Pack(1, j->tensor);
  PyObject* ver = PyLong_FromUnsignedLongLong(j->src_version);
  PyObject* versions = ver ? PyTuple_Pack(1, ver) : nullptr;
  Py_XDECREF(ver);
  if (!inputs || !versions) {
    Py_XDECREF(inputs);
    Py_XDECREF(versions);
    return -1;
  }
  OperationObject* o = reinterpret_cast<OperationObject*>(j->op);
  Py_XSETREF(o->inputs, inputs);
  Py_XSETREF(o->versions, versions);
  Py_XSETREF(as_tensor(j->output)->autograd_ctx, Py_NewRef(j->op));
  return 0;
}

// The terminal commit, exactly once, with the GIL held. ok: the transfer
// succeeded; otherwise its exception is set. Consumes the job.
void commit(MoveJob* j, bool ok) {
  if (ok) {
    // Publish the result (and its node), then give ownership back and
    // release the source, then record success.
    if (j->record_node && attach_node(j) < 0) ok = false;
  }
  // Versions first, while both carriers are still owned: once they are
  // given back (the source's release may run Python code) other threads may
  // write the destination, and a later restore would erase that bump.
  restore_versions(j);
  relinquish_both(j);
  if (ok && carrier_release(j->source) < 0) {
    ok = false;
    Py_CLEAR(as_tensor(j->output)->autograd_ctx);
  }
  if (!ok) {
    // Nothing is published: the node must not claim the source either.
    OperationObject* o = reinterpret_cast<OperationObject*>(j->op);
    if (j->record_node) {
      PyObject *et, *ev, *tb;
      PyErr_Fetch(&et, &ev, &tb);
      Py_CLEAR(o->inputs);
      Py_CLEAR(o->versions);
      PyErr_Restore(et, ev, tb);
    }
  }
  record_complete(j, ok);
  if (ok)
    await_complete(j->handle, j->output);
  else
    await_fail(j->handle);
  j->drop_refs();
  delete j;
}

// Runs body() on this thread the way provider work runs: grad mode off and
// owner access to both carriers, all restored afterwards with any pending
// exception kept. body returns 0 / -1 (or 1, passed through); -1 when access
// could not be taken.
template <class Body>
int with_provider_scope(MoveJob* j, Body&& body) {
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  int rc = -1;
  bool src_access = false, dst_access = false;
  if (carrier_begin_access(j->source, j->src_token) == 0) {
    src_access = true;
    if (carrier_begin_access(j->dest, j->dst_token) == 0) {
      dst_access = true;
      rc = body();
    }
  }
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (dst_access && carrier_end_access(j->dest, j->dst_token) < 0) PyErr_Clear();
  if (src_access && carrier_end_access(j->source, j->src_token) < 0) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  set_grad_enabled(prev);
  return rc;
}

// Calls op._copy(tensor, destination, output, element_count) in the
// provider scope. 0 / -1.
int run_python_copy(MoveJob* j) {
  return with_provider_scope(j, [j]() {
    PyObject* r = PyObject_CallMethod(j->op, "_copy", "OOOn", j->tensor, j->dest, j->output, j->count);
    if (!r) return -1;
    int rc = 0;
    if (r != Py_None) {
      PyErr_Format(PyExc_TypeError, "%s._copy() must return None, not %.100s", oname(j->op), oname(r));
      rc = -1;
    }
    Py_DECREF(r);
    return rc;
  });
}

// The worker side of one move.
void run_job(MoveJob* j) {
  PlanOutcome native;
  if (j->kind == CopyKind::Native) {
    native.run(j->plan);
    j->plan = nullptr;
  }
  if (interpreter_finalizing()) {
    // Too late to take the GIL: leave the job's objects to the dying runtime.
    flight_end();
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  bool ok;
  if (j->kind == CopyKind::Native) {
    ok = native.raise() == 0;
  } else if (j->kind == CopyKind::Provider) {
    ok = move_route_hooks.wait(j->completion) == 0;
  } else {
    ok = run_python_copy(j) == 0;
  }
  commit(j, ok);
  PyGILState_Release(g);
  flight_end();
}

// Runs a route's PreparedTransfer.submit() on the calling thread in the
// provider scope (as a _copy hook runs). 0 finished, 1 with j->completion
// set, -1 with an exception set.
int run_provider_submit(MoveJob* j, PyObject* prepared) {
  return with_provider_scope(j, [j, prepared]() { return move_route_hooks.submit(prepared, &j->completion); });
}

// Chooses how the worker copies: natively (the operation's _copy is a
// built-in one and the carriers are native) or by calling _copy.
int plan_copy(MoveJob* j) {
  PyObject* copy = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(j->op)), "_copy");
  if (!copy) return -1;
  const Py_ssize_t off = as_tensor(j->tensor)->offset;
  const sw::Layout& l = layout_of(as_tensor(j->tensor)->layout);
  int native = 0;
  if (copy == g_elementwise_copy)
    native = logical_plan(j->source, off, l, j->dest, 0, l, &j->plan);
  else if (copy == g_bulk_copy_c2f || copy == g_bulk_copy_f2c)
    native = span_plan(j->source, off, j->dest, 0, j->count, &j->plan);
  Py_DECREF(copy);
  j->kind = native ? CopyKind::Native : CopyKind::Python;
  return 0;
}

// The validation steps of the spec's table, in order, up to and including
// the pin check; *op_class receives the resolved (or given) operation class.
int validate(PyObject* tensor, PyObject* dest, PyObject* given_class, PyObject** op_class) {
  *op_class = nullptr;
  if (is_tensor(tensor) && tensor_reject_multi(tensor, "move") < 0) return -1;
  if (!is_tensor(tensor)) {
    PyErr_Format(PyExc_TypeError, "move_async() tensor must be a Tensor, not %.100s", oname(tensor));
    return -1;
  }
  PyObject* src = as_tensor(tensor)->carrier;
  if (carrier_is_released(src)) {
    PyErr_Format(PyExc_RuntimeError, "cannot move a tensor whose %s carrier is released", oname(src));
    return -1;
  }
  if (carrier_is_owned(src)) {
    PyErr_Format(PyExc_RuntimeError,
                 "the tensor's %s carrier is owned by another carrier or a pending move and cannot be moved "
                 "directly",
                 oname(src));
    return -1;
  }
  if (!is_carrier(dest)) {
    PyErr_Format(PyExc_TypeError, "move_async() destination must be a Carrier instance, not %.100s", oname(dest));
    return -1;
  }
  if (dest == src) {
    PyErr_SetString(PyExc_ValueError, "move_async() destination is the tensor's own carrier; pass another carrier");
    return -1;
  }
  if (carrier_is_released(dest)) {
    PyErr_Format(PyExc_RuntimeError, "destination %s carrier is released", oname(dest));
    return -1;
  }
  int m = carrier_is_mutable(dest);
  if (m < 0) return -1;
  if (!m) {
    PyErr_Format(PyExc_RuntimeError,
                 "destination %s carrier is not publicly mutable (constructed immutable, or owned by another "
                 "carrier or a pending move)",
                 oname(dest));
    return -1;
  }
  PyObject* ddtype = carrier_dtype(dest);
  if (!ddtype) return -1;
  int same = PyObject_RichCompareBool(ddtype, as_tensor(tensor)->dtype, Py_EQ);
  if (same <= 0) {
    if (same == 0)
      PyErr_Format(PyExc_TypeError, "destination dtype must match the tensor dtype: destination is %R, tensor is %R",
                   ddtype, as_tensor(tensor)->dtype);
    Py_DECREF(ddtype);
    return -1;
  }
  Py_DECREF(ddtype);
  PyObject* cls = given_class ? Py_NewRef(given_class) : move_resolve_route(Py_TYPE(src), Py_TYPE(dest));
  if (!cls) return -1;
  if (check_pins(cls, Py_TYPE(src), Py_TYPE(dest)) < 0) {
    Py_DECREF(cls);
    return -1;
  }
  *op_class = cls;
  return 0;
}

// The reverse route a differentiable move saves for backward. New reference
// or NULL (NotImplementedError when no permitted route exists).
PyObject* capture_reverse(PyTypeObject* src, PyTypeObject* dst) {
  PyObject* rev = move_resolve_route(dst, src);
  if (!rev) return nullptr;
  if (check_pins(rev, dst, src) < 0) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    PyErr_Format(PyExc_NotImplementedError,
                 "a differentiable move from %s to %s needs a permitted reverse route from %s to %s: %S",
                 tname(src), tname(dst), tname(dst), tname(src), ev ? ev : Py_None);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    Py_DECREF(rev);
    return nullptr;
  }
  return rev;
}

// move_async with an optional fixed operation: op_instance (MoveOperation.
// forward on that instance) or op_class (backward's captured route), else
// the route is resolved. A differentiable source in grad mode records the
// move node.
PyObject* move_async_impl(PyObject* tensor, PyObject* dest, PyObject* op_instance, PyObject* op_class) {
  const int64_t entry_ns = sw::now_ns();
  PyObject* cls = nullptr;
  PyObject* given = op_instance ? reinterpret_cast<PyObject*>(Py_TYPE(op_instance)) : op_class;
  if (validate(tensor, dest, given, &cls) < 0) return nullptr;
  TensorObject* t = as_tensor(tensor);
  PyObject* src = t->carrier;
  const sw::Layout& layout = layout_of(t->layout);
  const Py_ssize_t count = static_cast<Py_ssize_t>(layout.cosize());

  Py_ssize_t dsize = carrier_size(dest);
  if (dsize < 0) {
    Py_DECREF(cls);
    return nullptr;
  }
  // The last row of the validation table, decided before the reverse
  // route, prepare() or any claim, so a carrier that cannot allocate fails
  // like a too-small one: no provider call, no submit event.
  if (dsize < count && (dsize != 0 || !can_grow(dest))) {
    if (dsize != 0)
      PyErr_Format(PyExc_ValueError,
                   "destination %s carrier is too small: %zd slots for a layout cosize of %zd, and only an empty "
                   "destination can be allocated",
                   oname(dest), dsize, count);
    else
      PyErr_Format(PyExc_ValueError,
                   "destination %s carrier is too small: it is empty and cannot allocate the layout cosize of %zd",
                   oname(dest), count);
    Py_DECREF(cls);
    return nullptr;
  }
  if (op_instance && as_move_op(op_instance)->used) {
    PyErr_Format(PyExc_RuntimeError, "this %s already performed a move; use a new operation for each move",
                 oname(op_instance));
    Py_DECREF(cls);
    return nullptr;
  }
  // Taken now, not when the job adopts it: hooks run below (prepare, a
  // destination's allocate) and may re-enter forward on this instance.
  if (op_instance) as_move_op(op_instance)->used = true;

  PyObject* reverse = nullptr;
  const bool record_node = grad_enabled() && dtype_is_differentiable(t->dtype);
  if (record_node) {
    reverse = capture_reverse(Py_TYPE(src), Py_TYPE(dest));
    if (!reverse) {
      if (op_instance) as_move_op(op_instance)->used = false;
      Py_DECREF(cls);
      return nullptr;
    }
  }

  // A carrier-definition route is prepared now, after every validation and
  // before anything is claimed or allocated (extension.cpp); a declined
  // route may fall back to the elementwise operation.
  PyObject* prepared = nullptr;
  if (move_route_hooks.prepare) {
    int r = move_route_hooks.prepare(cls, tensor, dest, op_instance == nullptr, &prepared);
    if (r < 0) {
      if (op_instance) as_move_op(op_instance)->used = false;
      Py_DECREF(cls);
      Py_XDECREF(reverse);
      return nullptr;
    }
    if (r == 2) Py_SETREF(cls, Py_NewRef(reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type)));
  }

  auto* j = new (std::nothrow) MoveJob();
  if (!j) {
    if (op_instance) as_move_op(op_instance)->used = false;
    Py_DECREF(cls);
    Py_XDECREF(reverse);
    Py_XDECREF(prepared);
    return PyErr_NoMemory();
  }
  j->tensor = Py_NewRef(tensor);
  j->source = Py_NewRef(src);
  j->dest = Py_NewRef(dest);
  j->count = count;
  j->record_node = record_node;
  j->src_version = as_carrier(src)->version;
  j->dst_version = as_carrier(dest)->version;
  // Strong: Python code (hooks, the operation's __init__) runs before the
  // session is used and may drop every other reference to it.
  PyObject* session = Py_XNewRef(profiler_current());
  bool claimed = false;
  bool submit_failed = true;  // false: a validation failure, not a failed submission

  // Ownership first, so nothing else can touch either carrier from here on.
  j->src_token = carrier_claim(src);
  if (j->src_token <= 0) {
    j->src_token = 0;
    goto error;
  }
  j->dst_token = carrier_claim(dest);
  if (j->dst_token <= 0) {
    j->dst_token = 0;
    goto error;
  }
  claimed = true;
  if (dsize < count) {
    int r = carrier_reserve(dest, count);
    if (r < 0) goto error;
    if (r == 0) {  // can_grow() was wrong about this carrier
      PyErr_Format(PyExc_ValueError,
                   "destination %s carrier is too small: it is empty and cannot allocate the layout cosize of %zd",
                   oname(dest), count);
      submit_failed = false;
      goto error;
    }
  }
  j->output = tensor_new(dest, 0, t->layout);
  if (!j->output) goto error;
  if (op_instance) {
    j->op = Py_NewRef(op_instance);
  } else {
    j->op = PyObject_CallNoArgs(cls);
    if (!j->op) goto error;
    if (!PyObject_TypeCheck(j->op, &MoveOperation_Type)) {
      PyErr_Format(PyExc_TypeError, "%s() did not create a MoveOperation", tname(reinterpret_cast<PyTypeObject*>(cls)));
      goto error;
    }
  }
  {
    MoveOperationObject* mo = as_move_op(j->op);
    mo->used = true;
    Py_XSETREF(mo->reverse_op, reverse);
    reverse = nullptr;
    Py_XSETREF(mo->source_carrier, Py_NewRef(src));
    Py_XSETREF(mo->dest_carrier, Py_NewRef(dest));
    Py_XSETREF(mo->source_layout, Py_NewRef(t->layout));
  }
  j->handle = await_new(&AwaitMove_Type);
  if (!j->handle) goto error;
  if (prepared)
    j->kind = CopyKind::Provider;
  else if (plan_copy(j) < 0)
    goto error;
  if (session) {
    j->session = Py_NewRef(session);
    j->shapes = PyTuple_Pack(1, reinterpret_cast<LayoutObject*>(t->layout)->shape);
    if (!j->shapes) goto error;
    j->submit_id = profiler_new_id(session);
  }

  {
    PyObject* handle = Py_NewRef(j->handle);
    PyObject* shapes = Py_XNewRef(j->shapes);
    const int64_t submit_id = j->submit_id;
    j->transfer_start_ns = sw::now_ns();
    if (prepared) {
      // The route submits on this thread. From here a failure is the
      // handle's: submit() returning None (or raising, or returning no
      // valid completion) commits inline; a completion goes to a worker.
      const int r = run_provider_submit(j, prepared);
      Py_CLEAR(prepared);
      if (r == 1) {
        flight_begin();
        try {
          sw::submit([j] { run_job(j); });
        } catch (...) {
          flight_end();
          PyErr_SetString(PyExc_RuntimeError, "cannot start a move worker thread");
          commit(j, false);
        }
      }
      if (session) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);  // a failed submit(): the handle's, below
        const int64_t now = sw::now_ns();
        if (profiler_record(session, submit_id, profiler_parent_id(session), "move.submit",
                            reinterpret_cast<PyObject*>(Py_TYPE(src)), cls, shapes, entry_ns, now - entry_ns,
                            current_thread_id(), true) < 0)
          PyErr_Clear();
        PyErr_Restore(et, ev, tb);
      }
      if (r != 1) commit(j, r == 0);
      Py_XDECREF(shapes);
      Py_XDECREF(session);
      Py_DECREF(cls);
      return handle;
    }
    flight_begin();
    try {
      sw::submit([j] { run_job(j); });
    } catch (...) {
      flight_end();
      Py_DECREF(handle);
      Py_XDECREF(shapes);
      PyErr_SetString(PyExc_RuntimeError, "cannot start a move worker thread");
      goto error;
    }
    // From here the job belongs to the worker (which may already be done).
    if (session) {
      const int64_t now = sw::now_ns();
      if (profiler_record(session, submit_id, profiler_parent_id(session), "move.submit",
                          reinterpret_cast<PyObject*>(Py_TYPE(src)), cls, shapes, entry_ns, now - entry_ns,
                          current_thread_id(), true) < 0)
        PyErr_Clear();
    }
    Py_XDECREF(shapes);
    Py_XDECREF(session);
    Py_DECREF(cls);
    return handle;
  }

error:
  // Nothing was submitted: undo the claim, leave both carriers as they were
  // (a grown empty destination stays allocated), record a failed submit.
  if (op_instance) as_move_op(op_instance)->used = false;
  else if (j->op) as_move_op(j->op)->used = false;
  relinquish_both(j);
  if (claimed) restore_versions(j);
  if (session && claimed && submit_failed) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const int64_t now = sw::now_ns();
    if (profiler_record(session, profiler_new_id(session), profiler_parent_id(session), "move.submit",
                        reinterpret_cast<PyObject*>(Py_TYPE(src)), cls, nullptr, entry_ns, now - entry_ns,
                        current_thread_id(), false) < 0)
      PyErr_Clear();
    PyErr_Restore(et, ev, tb);
  }
  Py_XDECREF(reverse);
  Py_XDECREF(prepared);
  Py_XDECREF(session);
  Py_DECREF(cls);
  j->drop_refs();
  delete j;
  return nullptr;
}

PyObject* wait_handle(PyObject* handle) {
  PyObject* r = PyObject_CallMethod(handle, "wait", nullptr);
  Py_DECREF(handle);
  return r;
}

// ------------------------------------------------------------ MoveOperation

int MoveOp_traverse(PyObject* self, visitproc visit, void* arg) {
  MoveOperationObject* m = as_move_op(self);
  Py_VISIT(m->reverse_op);
  Py_VISIT(m->source_carrier);
  Py_VISIT(m->dest_carrier);
  Py_VISIT(m->source_layout);
  return Operation_Type.tp_traverse(self, visit, arg);
}

int MoveOp_clear(PyObject* self) {
  MoveOperationObject* m = as_move_op(self);
  Py_CLEAR(m->reverse_op);
  Py_CLEAR(m->source_carrier);
  Py_CLEAR(m->dest_carrier);
  Py_CLEAR(m->source_layout);
  return Operation_Type.tp_clear(self);
}

void MoveOp_dealloc(PyObject* self) {
  MoveOperationObject* m = as_move_op(self);
  // Untrack before clearing: a field's finalizer may run the collector,
  // which must not see this dying object (it would free it a second time).
  PyObject_GC_UnTrack(self);
  Py_CLEAR(m->reverse_op);
  Py_CLEAR(m->source_carrier);
  Py_CLEAR(m->dest_carrier);
  Py_CLEAR(m->source_layout);
  Operation_Type.tp_dealloc(self);
}

PyObject* MoveOp_copy_abstract(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError,
               "%s does not implement _copy(tensor, destination, output, element_count)", oname(self));
  return nullptr;
}

// Parses the _copy arguments of the built-in implementations.
int parse_copy_args(PyObject* args, PyObject** tensor, PyObject** dest, PyObject** output, Py_ssize_t* count) {
  if (!PyArg_ParseTuple(args, "OOOn:_copy", tensor, dest, output, count)) return -1;
  if (!is_tensor(*tensor) || !is_tensor(*output)) {
    PyErr_SetString(PyExc_TypeError, "_copy() tensor and output must be Tensors");
    return -1;
  }
  if (!is_carrier(*dest) || as_tensor(*output)->carrier != *dest) {
    PyErr_SetString(PyExc_TypeError, "_copy() destination must be the Carrier output is bound to");
    return -1;
  }
  if (tensor_reject_multi(*tensor, "move") < 0) return -1;
  const sw::Layout& sl = layout_of(as_tensor(*tensor)->layout);
  const sw::Layout& dl = layout_of(as_tensor(*output)->layout);
  if (!(sl.shape() == dl.shape())) {
    PyErr_SetString(PyExc_ValueError, "_copy() output must have the tensor's shape");
    return -1;
  }
  return 0;
}

// Built-in _copy of ElementwiseMoveOperation: a native strided copy of the
// logical elements when both carriers are native, else value by value
// through the carriers (slots the layout does not address are untouched).
PyObject* Elementwise_copy(PyObject*, PyObject* args) {
  PyObject *tensor, *dest, *output;
  Py_ssize_t count;
  if (parse_copy_args(args, &tensor, &dest, &output, &count) < 0) return nullptr;
  TensorObject* s = as_tensor(tensor);
  TensorObject* o = as_tensor(output);
  const sw::Layout& sl = layout_of(s->layout);
  const sw::Layout& dl = layout_of(o->layout);
  Plan plan;
  if (logical_plan(s->carrier, s->offset, sl, dest, o->offset, dl, &plan)) {
    if (run_plan_unlocked(plan) < 0) return nullptr;
    Py_RETURN_NONE;
  }
  if (elementwise_values(s->carrier, s->offset, sl, dest, o->offset, dl) < 0) return nullptr;
  Py_RETURN_NONE;
}

// Built-in _copy of the CPU <-> FileBacked operations: the whole physical
// span [offset, offset + element_count) in one bulk copy.
PyObject* Bulk_copy(PyObject* self, PyObject* args) {
  PyObject *tensor, *dest, *output;
  Py_ssize_t count;
  if (parse_copy_args(args, &tensor, &dest, &output, &count) < 0) return nullptr;
  TensorObject* s = as_tensor(tensor);
  TensorObject* o = as_tensor(output);
  Py_ssize_t ssize = carrier_size(s->carrier), dsize = carrier_size(dest);
  if (ssize < 0 || dsize < 0) return nullptr;
  if (count < 0 || s->offset + count > ssize || o->offset + count > dsize) {
    PyErr_SetString(PyExc_ValueError, "_copy() element_count exceeds a carrier");
    return nullptr;
  }
  Plan plan;
  if (!span_plan(s->carrier, s->offset, dest, o->offset, count, &plan)) {
    PyErr_Format(PyExc_TypeError, "%s copies between native CPU and FileBacked carriers of one dtype only",
                 oname(self));
    return nullptr;
  }
  if (run_plan_unlocked(plan) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* MoveOp_forward(PyObject* self, PyObject* args) {
  PyObject *tensor, *dest;
  if (!PyArg_ParseTuple(args, "OO:forward", &tensor, &dest)) return nullptr;
  PyObject* h = move_async_impl(tensor, dest, self, nullptr);
  if (!h) return nullptr;
  return wait_handle(h);
}

// Runs plan reading from source, a carrier no move owns (the caller's
// cotangent). It is claimed for the copy so no other thread can write or
// release it while the GIL is released; one that is already owned (say an
// Evictable tier) is copied with the GIL held instead. 0 / -1.
int run_plan_reading(PyObject* source, const Plan& plan) {
  if (int64_t token = carrier_claim(source)) {
    int rc = run_plan_unlocked(plan);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (carrier_relinquish(source, token) < 0) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return rc;
  }
  PyErr_Clear();
  PlanOutcome out;
  out.run(plan);
  return out.raise();
}

// Copies the cotangent's logical values into stage under layout l.
int stage_cotangent(PyObject* g, PyObject* stage, const sw::Layout& l) {
  TensorObject* gt = as_tensor(g);
  const sw::Layout& gl = layout_of(gt->layout);
  Plan plan;
  if (logical_plan(gt->carrier, gt->offset, gl, stage, 0, l, &plan)) return run_plan_reading(gt->carrier, plan);
  return elementwise_values(gt->carrier, gt->offset, gl, stage, 0, l);
}

// backward(gradient): one cotangent for the move's result; returns a one-
// element tuple holding a detached gradient in fresh storage of the source
// carrier's exact class, moved there through the captured reverse route.
PyObject* MoveOp_backward(PyObject* self, PyObject* g) {
  MoveOperationObject* m = as_move_op(self);
  if (!is_tensor(g)) {
    PyErr_Format(PyExc_TypeError, "%s.backward() expects a Tensor cotangent, not %.100s", oname(self), oname(g));
    return nullptr;
  }
  if (tensor_reject_multi(g, "backward") < 0) return nullptr;
  if (carrier_is_released(as_tensor(g)->carrier)) {
    PyErr_Format(PyExc_RuntimeError, "the cotangent's %s carrier is released", oname(as_tensor(g)->carrier));
    return nullptr;
  }
  if (!m->reverse_op || !m->source_carrier || !m->source_layout || !m->dest_carrier) {
    PyErr_Format(PyExc_RuntimeError, "this %s has not recorded a differentiable move", oname(self));
    return nullptr;
  }
  const sw::Layout& src_l = layout_of(m->source_layout);
  const sw::Layout& gl = layout_of(as_tensor(g)->layout);
  if (!(gl.shape() == src_l.shape())) {
    PyObject* gs = reinterpret_cast<LayoutObject*>(as_tensor(g)->layout)->shape;
    PyObject* ss = reinterpret_cast<LayoutObject*>(m->source_layout)->shape;
    PyErr_Format(PyExc_ValueError, "cotangent shape %R does not match the moved tensor's shape %R", gs, ss);
    return nullptr;
  }
  if (!gl.is_injective()) {
    PyErr_SetString(PyExc_ValueError,
                    "move backward requires an injective gradient Layout; the cotangent's layout maps several "
                    "coordinates to one slot");
    return nullptr;
  }
  PyObject* layout_obj = nullptr;
  if (src_l.is_injective()) {
    layout_obj = Py_NewRef(m->source_layout);
  } else {
    layout_obj = layout_from_engine(grad_layout_for(src_l));
    if (!layout_obj) return nullptr;
  }
  const sw::Layout& l = layout_of(layout_obj);
  const Py_ssize_t n = static_cast<Py_ssize_t>(l.cosize());
  PyObject *stage = nullptr, *staged = nullptr, *target = nullptr, *h = nullptr, *grad = nullptr, *out = nullptr;
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  // Stage the values in fresh storage of the forward destination's class,
  // so the captured reverse route moves (and releases) only our copy, never
  // the caller's cotangent.
  stage = carrier_allocate_like(m->dest_carrier, n, true, nullptr, true);
  if (!stage || stage_cotangent(g, stage, l) < 0) goto done;
  staged = tensor_new(stage, 0, layout_obj);
  if (!staged) goto done;
  target = carrier_allocate_like(m->source_carrier, n, true, nullptr, true);
  if (!target) goto done;
  h = move_async_impl(staged, target, nullptr, m->reverse_op);
  if (!h) goto done;
  grad = wait_handle(h);
  if (grad) out = PyTuple_Pack(1, grad);
done:
  set_grad_enabled(prev);
  Py_XDECREF(grad);
  Py_XDECREF(target);
  Py_XDECREF(staged);
  Py_XDECREF(stage);
  Py_DECREF(layout_obj);
  return out;
}

PyMethodDef MoveOp_methods[] = {
    {"_copy", MoveOp_copy_abstract, METH_VARARGS,
     "_copy(tensor, destination, output, element_count) -> None: subclass hook performing one transfer. It runs "
     "on a worker thread holding the GIL, with grad mode off and owner access to both carriers; element_count is "
     "the layout's cosize."},
    {"forward", MoveOp_forward, METH_VARARGS,
     "forward(tensor, destination): perform one blocking move with this operation (pins checked)."},
    {"backward", MoveOp_backward, METH_O,
     "backward(gradient): a fresh gradient in the source carrier's exact class, through the captured reverse "
     "route; returns a one-element tuple."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef Elementwise_methods[] = {
    {"_copy", Elementwise_copy, METH_VARARGS,
     "Copy the logical elements (native strided copy for native carriers, value by value otherwise)."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef Bulk_methods[] = {
    {"_copy", Bulk_copy, METH_VARARGS, "Bulk copy of the whole physical span [offset, offset + element_count)."},
    {nullptr, nullptr, 0, nullptr}};

// ------------------------------------------------------------ module functions

PyObject* mod_move_async(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"tensor", "destination", nullptr};
  PyObject *tensor, *dest;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:move_async", const_cast<char**>(kwlist), &tensor, &dest))
    return nullptr;
  return move_async_impl(tensor, dest, nullptr, nullptr);
}

PyObject* mod_move(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"tensor", "destination", nullptr};
  PyObject *tensor, *dest;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:move", const_cast<char**>(kwlist), &tensor, &dest))
    return nullptr;
  return move_blocking(tensor, dest);
}

PyObject* mod_dispatch_move(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", nullptr};
  PyObject *src, *dst;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:dispatch_move", const_cast<char**>(kwlist), &src, &dst))
    return nullptr;
  if (check_pair(src, dst) < 0) return nullptr;
  return registry_lookup(reinterpret_cast<PyTypeObject*>(src), reinterpret_cast<PyTypeObject*>(dst));
}

PyObject* mod_register(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", "operation_class", nullptr};
  PyObject *src, *dst, *op;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:register_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst, &op))
    return nullptr;
  if (check_carrier_class(src, "source_class") < 0 || check_carrier_class(dst, "destination_class") < 0 ||
      check_op_class(op) < 0 || check_pair(src, dst) < 0)
    return nullptr;
  if (registry_add(reinterpret_cast<PyTypeObject*>(src), reinterpret_cast<PyTypeObject*>(dst), op) < 0)
    return nullptr;
  Py_RETURN_NONE;
}

PyObject* mod_unregister(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", nullptr};
  PyObject *src, *dst;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:unregister_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst))
    return nullptr;
  if (check_pair(src, dst) < 0) return nullptr;
  return registry_remove(reinterpret_cast<PyTypeObject*>(src), reinterpret_cast<PyTypeObject*>(dst));
}

// registered_move_operation(...): a context manager registering on entry
// and unregistering on exit (normal or raising), never suppressing.
struct ScopedRegObject {
  PyObject_HEAD
  PyObject* src;
  PyObject* dst;
  PyObject* op;
  bool active;
};

PyTypeObject ScopedReg_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave._core.registered_move_operation",
                               sizeof(ScopedRegObject)};

ScopedRegObject* as_scoped(PyObject* o) { return reinterpret_cast<ScopedRegObject*>(o); }

void ScopedReg_dealloc(PyObject* self) {
  Py_CLEAR(as_scoped(self)->src);
  Py_CLEAR(as_scoped(self)->dst);
  Py_CLEAR(as_scoped(self)->op);
  Py_TYPE(self)->tp_free(self);
}

PyObject* ScopedReg_enter(PyObject* self, PyObject*) {
  ScopedRegObject* s = as_scoped(self);
  if (s->active) {
    PyErr_SetString(PyExc_RuntimeError, "registered_move_operation context is already entered");
    return nullptr;
  }
  if (check_pair(s->src, s->dst) < 0) return nullptr;
  if (registry_add(reinterpret_cast<PyTypeObject*>(s->src), reinterpret_cast<PyTypeObject*>(s->dst), s->op) < 0)
    return nullptr;
  s->active = true;
  return Py_NewRef(s->op);
}

PyObject* ScopedReg_exit(PyObject* self, PyObject*) {
  ScopedRegObject* s = as_scoped(self);
  if (s->active) {
    s->active = false;
    // Remove the pair only while it still maps to our class: the body may
    // have unregistered it already, and exit must not mask its exception.
    PyObject* key = pair_key(reinterpret_cast<PyTypeObject*>(s->src), reinterpret_cast<PyTypeObject*>(s->dst));
    if (!key) return nullptr;
    PyObject* cur = PyDict_GetItemWithError(g_registry, key);
    int rc = 0;
    if (cur == s->op) rc = PyDict_DelItem(g_registry, key);
    else if (PyErr_Occurred()) rc = -1;
    Py_DECREF(key);
    if (rc < 0) return nullptr;
  }
  Py_RETURN_FALSE;
}

PyMethodDef ScopedReg_methods[] = {{"__enter__", ScopedReg_enter, METH_NOARGS, nullptr},
                                   {"__exit__", ScopedReg_exit, METH_VARARGS, nullptr},
                                   {nullptr, nullptr, 0, nullptr}};

PyObject* mod_registered(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", "operation_class", nullptr};
  PyObject *src, *dst, *op;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:registered_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst, &op))
    return nullptr;
  if (check_carrier_class(src, "source_class") < 0 || check_carrier_class(dst, "destination_class") < 0 ||
      check_op_class(op) < 0 || check_pair(src, dst) < 0)
    return nullptr;
  // Duplicates are rejected now too, so a bad block fails before it starts.
  if (check_free(reinterpret_cast<PyTypeObject*>(src), reinterpret_cast<PyTypeObject*>(dst)) < 0) return nullptr;
  PyObject* self = ScopedReg_Type.tp_alloc(&ScopedReg_Type, 0);
  if (!self) return nullptr;
  ScopedRegObject* s = as_scoped(self);
  s->src = Py_NewRef(src);
  s->dst = Py_NewRef(dst);
  s->op = Py_NewRef(op);
  s->active = false;
  return self;
}

// atexit: let in-flight moves reach their terminal commit (a dropped handle
// still completes) while the runtime they need is still alive. Exit is rare
// and short, so polling keeps this free of locks a fork could orphan.
PyObject* mod_drain(PyObject*, PyObject*) {
  while (g_in_flight.load() != 0) {
    Py_BEGIN_ALLOW_THREADS
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

PyObject* mod_in_flight(PyObject*, PyObject*) { return PyLong_FromSize_t(g_in_flight.load()); }

// os.register_at_fork(after_in_child=...): the parent's pending moves do not
// exist in the child.
PyObject* mod_after_fork_child(PyObject*, PyObject*) {
  g_in_flight.store(0);
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"move_async", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_move_async)),
     METH_VARARGS | METH_KEYWORDS,
     "move_async(tensor, destination)\n--\n\nValidate, initiate one move into destination and return "
     "its handle without waiting for the transfer."},
    {"move", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_move)), METH_VARARGS | METH_KEYWORDS,
     "move(tensor, destination)\n--\n\nmove_async(tensor, destination).wait(): the moved Tensor, backed "
     "by destination at offset 0 with the same Layout; the source carrier is released."},
    {"dispatch_move", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_dispatch_move)),
     METH_VARARGS | METH_KEYWORDS,
     "dispatch_move(source_class, destination_class)\n--\n\nThe operation class registered for this exact pair, "
     "else ElementwiseMoveOperation."},
    {"register_move_operation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_register)),
     METH_VARARGS | METH_KEYWORDS,
     "register_move_operation(source_class, destination_class, operation_class)\n--\n\nRegister operation_class "
     "for the exact pair; ValueError when the pair already has one."},
    {"unregister_move_operation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_unregister)),
     METH_VARARGS | METH_KEYWORDS,
     "unregister_move_operation(source_class, destination_class)\n--\n\nRemove and return the operation class of "
     "the exact pair; KeyError when none."},
    {"registered_move_operation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(mod_registered)),
     METH_VARARGS | METH_KEYWORDS,
     "registered_move_operation(source_class, destination_class, operation_class)\n--\n\nContext manager: "
     "registers the exact pair on entry (yielding operation_class) and unregisters it on exit."},
    {"_drain_moves", mod_drain, METH_NOARGS, "Block until every in-flight move has completed (used at exit)."},
    {"_moves_in_flight", mod_in_flight, METH_NOARGS, "Number of moves submitted and not yet completed."},
    {"_moves_after_fork_child", mod_after_fork_child, METH_NOARGS, "Forget the parent's pending moves."},
    {nullptr, nullptr, 0, nullptr}};

int set_pins(PyTypeObject* op, PyTypeObject* src, PyTypeObject* dst) {
  if (PyDict_SetItemString(op->tp_dict, "source_class", src ? reinterpret_cast<PyObject*>(src) : Py_None) < 0 ||
      PyDict_SetItemString(op->tp_dict, "destination_class", dst ? reinterpret_cast<PyObject*>(dst) : Py_None) < 0)
    return -1;
  PyType_Modified(op);
  return 0;
}

PyObject* copy_descr(PyTypeObject* t) { return PyDict_GetItemString(t->tp_dict, "_copy"); }

void init_op_type(PyTypeObject* t, PyTypeObject* base, const char* doc, PyMethodDef* methods) {
  t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t->tp_doc = doc;
  t->tp_base = base;
  t->tp_methods = methods;
  t->tp_traverse = MoveOp_traverse;
  t->tp_clear = MoveOp_clear;
  t->tp_dealloc = MoveOp_dealloc;
}

}  // namespace

int move_check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst) {
  return check_pins(op_class, src, dst);
}

PyTypeObject MoveOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.MoveOperation",
                                   sizeof(MoveOperationObject)};
PyTypeObject ElementwiseMoveOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0)
                                              "strideweave.ElementwiseMoveOperation",
                                              sizeof(MoveOperationObject)};
PyTypeObject CpuToFileBackedMoveOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0)
                                                  "strideweave.CpuToFileBackedMoveOperation",
                                                  sizeof(MoveOperationObject)};
PyTypeObject FileBackedToCpuMoveOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0)
                                                  "strideweave.FileBackedToCpuMoveOperation",
                                                  sizeof(MoveOperationObject)};

int move_register_builtin(PyTypeObject* src, PyTypeObject* dst, PyTypeObject* op) {
  if (!g_registry) {
    PyErr_SetString(PyExc_RuntimeError, "the move registry is not initialised yet");
    return -1;
  }
  return registry_add(src, dst, reinterpret_cast<PyObject*>(op));
}

PyObject* move_resolve_route(PyTypeObject* src, PyTypeObject* dst) {
  if (move_route_hooks.resolve) {
    PyObject* op = nullptr;
    int r = move_route_hooks.resolve(src, dst, &op);
    if (r < 0) return nullptr;
    if (r > 0) return op;
  }
  return registry_lookup(src, dst);
}

PyObject* move_async(PyObject* tensor, PyObject* destination) {
  return move_async_impl(tensor, destination, nullptr, nullptr);
}

PyObject* move_blocking(PyObject* tensor, PyObject* destination) {
  PyObject* h = move_async_impl(tensor, destination, nullptr, nullptr);
  if (!h) return nullptr;
  return wait_handle(h);
}

// ---- move_lowered: framework-owned transfers (Evictable residency; see sw.hpp)
// The same route resolution, pin check, destination growth and copy planning
// as move_async, run synchronously on this thread, without ownership checks
// or claims, autograd node, profiling events or source release.
PyObject* move_lowered(PyObject* tensor, PyObject* destination, int64_t src_token, int64_t dst_token) {
  if (!is_tensor(tensor) || !is_carrier(destination)) {
    PyErr_SetString(PyExc_TypeError, "move_lowered() needs a Tensor and a Carrier");
    return nullptr;
  }
  if (tensor_reject_multi(tensor, "move") < 0) return nullptr;
  PyObject* src = as_tensor(tensor)->carrier;
  if (src == destination) {
    PyErr_SetString(PyExc_ValueError, "move_lowered() destination is the tensor's own carrier");
    return nullptr;
  }
  PyObject* cls = move_resolve_route(Py_TYPE(src), Py_TYPE(destination));
  if (!cls) return nullptr;
  if (check_pins(cls, Py_TYPE(src), Py_TYPE(destination)) < 0) {
    Py_DECREF(cls);
    return nullptr;
  }
  MoveJob j;
  j.tensor = Py_NewRef(tensor);
  j.source = Py_NewRef(src);
  j.dest = Py_NewRef(destination);
  j.src_token = src_token;
  j.dst_token = dst_token;
  j.count = static_cast<Py_ssize_t>(layout_of(as_tensor(tensor)->layout).cosize());
  j.src_version = as_carrier(src)->version;
  j.dst_version = as_carrier(destination)->version;
  PyObject* result = nullptr;
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  Py_ssize_t dsize = carrier_size(destination);
  int rc = -1;
  if (dsize < 0) goto done;
  if (dsize < j.count) {
    const int r = dsize == 0 ? carrier_reserve(destination, j.count) : 0;
    if (r < 0) goto done;
    if (r == 0) {
      PyErr_Format(PyExc_ValueError, "destination %s carrier is too small: %zd slots for a layout cosize of %zd",
                   oname(destination), dsize, j.count);
      goto done;
    }
  }
  j.output = tensor_new(destination, 0, as_tensor(tensor)->layout);
  if (!j.output) goto done;
  j.op = PyObject_CallNoArgs(cls);
  if (!j.op) goto done;
  if (!PyObject_TypeCheck(j.op, &MoveOperation_Type)) {
    PyErr_Format(PyExc_TypeError, "%s() did not create a MoveOperation", tname(reinterpret_cast<PyTypeObject*>(cls)));
    goto done;
  }
  as_move_op(j.op)->used = true;
  if (plan_copy(&j) < 0) goto done;
  rc = j.kind == CopyKind::Native ? run_plan_unlocked(j.plan) : run_python_copy(&j);
  if (rc == 0) result = Py_NewRef(j.output);
done:
  set_grad_enabled(prev);
  restore_versions(&j);  // a transfer is not a value write
  j.src_token = j.dst_token = 0;  // the caller's tokens: nothing to give back
  j.drop_refs();
  Py_DECREF(cls);
  return result;
}

int move_module_init(PyObject* module) {
  init_op_type(&MoveOperation_Type, &Operation_Type,
               "Open base of move operations and of the autograd node a differentiable move records. Subclasses "
               "implement _copy(tensor, destination, output, element_count) and may pin source_class / "
               "destination_class to exact carrier classes.",
               MoveOp_methods);
  init_op_type(&ElementwiseMoveOperation_Type, &MoveOperation_Type,
               "The fallback move: copies logical values (natively for native carriers); holes keep their values.",
               Elementwise_methods);
  init_op_type(&CpuToFileBackedMoveOperation_Type, &MoveOperation_Type,
               "Registered bulk move from CPU to FileBacked: writes the whole physical span.", Bulk_methods);
  init_op_type(&FileBackedToCpuMoveOperation_Type, &MoveOperation_Type,
               "Registered bulk move from FileBacked to CPU: reads the whole physical span.", Bulk_methods);
  if (add_type(module, &MoveOperation_Type, "MoveOperation") < 0 ||
      add_type(module, &ElementwiseMoveOperation_Type, "ElementwiseMoveOperation") < 0 ||
      add_type(module, &CpuToFileBackedMoveOperation_Type, "CpuToFileBackedMoveOperation") < 0 ||
      add_type(module, &FileBackedToCpuMoveOperation_Type, "FileBackedToCpuMoveOperation") < 0)
    return -1;
  if (set_pins(&MoveOperation_Type, nullptr, nullptr) < 0 ||
      set_pins(&CpuToFileBackedMoveOperation_Type, &CPU_Type, &FileBacked_Type) < 0 ||
      set_pins(&FileBackedToCpuMoveOperation_Type, &FileBacked_Type, &CPU_Type) < 0)
    return -1;
  g_elementwise_copy = copy_descr(&ElementwiseMoveOperation_Type);
  g_bulk_copy_c2f = copy_descr(&CpuToFileBackedMoveOperation_Type);
  g_bulk_copy_f2c = copy_descr(&FileBackedToCpuMoveOperation_Type);
  if (!g_elementwise_copy || !g_bulk_copy_c2f || !g_bulk_copy_f2c) {
    PyErr_SetString(PyExc_SystemError, "move operation types lack _copy");
    return -1;
  }

  ScopedReg_Type.tp_flags = Py_TPFLAGS_DEFAULT;
  ScopedReg_Type.tp_doc = "Context manager returned by registered_move_operation().";
  ScopedReg_Type.tp_dealloc = ScopedReg_dealloc;
  ScopedReg_Type.tp_methods = ScopedReg_methods;
  if (PyType_Ready(&ScopedReg_Type) < 0) return -1;

  g_registry = PyDict_New();  // process lifetime
  if (!g_registry) return -1;
  if (move_register_builtin(&CPU_Type, &FileBacked_Type, &CpuToFileBackedMoveOperation_Type) < 0 ||
      move_register_builtin(&FileBacked_Type, &CPU_Type, &FileBackedToCpuMoveOperation_Type) < 0)
    return -1;
  if (PyModule_AddFunctions(module, module_methods) < 0) return -1;

  // Wait for pending moves at interpreter exit (see mod_drain).
  PyObject* atexit = PyImport_ImportModule("atexit");
  if (!atexit) return -1;
  PyObject* drain = PyObject_GetAttrString(module, "_drain_moves");
  PyObject* r = drain ? PyObject_CallMethod(atexit, "register", "O", drain) : nullptr;
  Py_XDECREF(drain);
  Py_DECREF(atexit);
  if (!r) return -1;
  Py_DECREF(r);
  PyObject* os = PyImport_ImportModule("os");
  if (!os) return -1;
  PyObject* child = PyObject_GetAttrString(module, "_moves_after_fork_child");
  PyObject* reg = child ? PyObject_GetAttrString(os, "register_at_fork") : nullptr;
  PyObject* kw = reg ? Py_BuildValue("{s:O}", "after_in_child", child) : nullptr;
  PyObject* no_args = kw ? PyTuple_New(0) : nullptr;
  PyObject* r2 = no_args ? PyObject_Call(reg, no_args, kw) : nullptr;
  Py_XDECREF(no_args);
  Py_XDECREF(kw);
  Py_XDECREF(reg);
  Py_XDECREF(child);
  Py_DECREF(os);
  if (!r2) return -1;
  Py_DECREF(r2);
  return 0;
}

}  // namespace swpy

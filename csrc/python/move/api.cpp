// move / move_async: one primitive, move_async_impl, validates in the
// spec's order, resolves the exact-pair operation (move_resolve_route),
// captures the reverse route for a differentiable move, prepares a
// carrier-definition route, claims ownership of both carriers, allocates an
// empty destination to layout.cosize, and submits the transfer: through the
// route's own submit(), on this thread (a native copy between built-in
// carriers that the caller waits for anyway, or that is too small to be
// worth a hand-off), or to a worker (job.cpp; commit_lane.cpp for native
// copies between built-in carriers).
#include <memory>
#include <new>

#include "move/internal.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "await_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "profiler_api.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "util/fastcall.hpp"
#include "runtime/clock.hpp"
#include "movement/submit_policy.hpp"
#include "util/type_object.hpp"

namespace swpy {

// The destination's dtype must be the tensor's: names both and the fix.
int move_check_dtype(PyObject* tensor, PyObject* dest) {
  Ref ddtype = Ref::steal(carrier_dtype(dest));
  if (!ddtype) return -1;
  PyObject* tdtype = as_tensor(tensor)->dtype;
  const int same = PyObject_RichCompareBool(ddtype.get(), tdtype, Py_EQ);
  if (same < 0) return -1;
  if (same == 0) {
    PyErr_Format(PyExc_TypeError,
                 "destination dtype must match the tensor dtype: destination is %R, tensor is %R; create the "
                 "destination with dtype=%R",
                 ddtype.get(), tdtype, tdtype);
    return -1;
  }
  return 0;
}

namespace move_internal {

namespace {

PyObject* elementwise_class() { return reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type); }

// ------------------------------------------------------------ validation

// The validation steps of the spec's table, in order, up to and including
// the pin check; op_class receives the resolved (or given) operation class.
// fn names the call the user made ("move" or "move_async") in messages.
int validate(PyObject* tensor, PyObject* dest, PyObject* given_class, Ref* op_class, const char* fn) {
  if (is_tensor(tensor) && tensor_reject_multi(tensor, "move") < 0) return -1;
  if (!is_tensor(tensor)) {
    PyErr_Format(PyExc_TypeError,
                 "%s() tensor must be a Tensor, not %.100s (make one from data with strideweave.tensor(data))", fn,
                 type_name(tensor));
    return -1;
  }
  PyObject* src = as_tensor(tensor)->carrier;
  if (carrier_is_released(src)) {
    PyErr_Format(PyExc_RuntimeError, "cannot move a tensor whose %s carrier is released", type_name(src));
    return -1;
  }
  if (carrier_is_owned(src)) {
    PyErr_Format(PyExc_RuntimeError,
                 "the tensor's %s carrier is owned by another carrier or a pending move and cannot be moved "
                 "directly",
                 type_name(src));
    return -1;
  }
  if (!is_carrier(dest)) {
    PyErr_Format(PyExc_TypeError, "%s() destination must be a Carrier instance, not %.100s", fn, type_name(dest));
    return -1;
  }
  if (dest == src) {
    PyErr_Format(PyExc_ValueError, "%s() destination is the tensor's own carrier; pass another carrier", fn);
    return -1;
  }
  if (carrier_is_released(dest)) {
    PyErr_Format(PyExc_RuntimeError, "destination %s carrier is released", type_name(dest));
    return -1;
  }
  const int m = carrier_is_mutable(dest);
  if (m < 0) return -1;
  if (!m) {
    PyErr_Format(PyExc_RuntimeError,
                 "destination %s carrier is not publicly mutable (constructed immutable, or owned by another "
                 "carrier or a pending move)",
                 type_name(dest));
    return -1;
  }
  if (move_check_dtype(tensor, dest) < 0) return -1;
  Ref cls;
  if (given_class) {
    cls = Ref::borrow(given_class);
    if (check_pins(cls.get(), Py_TYPE(src), Py_TYPE(dest)) < 0) return -1;
  } else {
    cls = Ref::steal(resolve_checked(Py_TYPE(src), Py_TYPE(dest)));
    if (!cls) return -1;
  }
  *op_class = std::move(cls);
  return 0;
}

// NotImplementedError for a differentiable move without a permitted reverse
// route: why (cause, the pending exception, is consumed) and the way out.
void raise_no_reverse(PyTypeObject* src, PyTypeObject* dst) {
  Ref cause = Ref::steal(compat::take_raised());
  PyErr_Format(PyExc_NotImplementedError,
               "a differentiable move from %s to %s needs a permitted reverse route from %s to %s (backward "
               "moves the gradient back through it): %S. Inside `with no_grad():` the move records no gradient "
               "and needs no reverse route",
               type_name(src), type_name(dst), type_name(dst), type_name(src), cause ? cause.get() : Py_None);
}

// The reverse route a differentiable move saves for backward. New reference
// or NULL (NotImplementedError when no permitted route exists).
PyObject* capture_reverse(PyTypeObject* src, PyTypeObject* dst) {
  if (PyObject* cached = cached_route(dst, src)) return Py_NewRef(cached);
  Ref rev = Ref::steal(move_resolve_route(dst, src));
  if (!rev) {
    // Only "no route" is about backward; anything else is raised as it is.
    if (PyErr_ExceptionMatches(PyExc_NotImplementedError)) raise_no_reverse(src, dst);
    return nullptr;
  }
  if (check_pins(rev.get(), dst, src) < 0) {
    raise_no_reverse(src, dst);
    return nullptr;
  }
  remember_route(dst, src, rev.get());
  return rev.release();
}

// Whether an empty carrier can grow to a move's span: exactly the carriers
// with a reserve hook (CPU and Evictable are fixed-size and have none, nor
// does a Python carrier without native storage or a definition).
bool can_grow(PyObject* c) {
  const CarrierVTable* vt = as_carrier(c)->vt;
  return vt && vt->reserve;
}

// ------------------------------------------------------------ submission

// One move_async call while it is being set up: what the steps found, and
// what must be undone when a later step fails.
struct Submission {
  Submission(PyObject* t, PyObject* d, PyObject* op) : tensor(t), dest(d), op_instance(op) {}

  PyObject* tensor;       // borrowed: the caller's
  PyObject* dest;         // borrowed
  PyObject* op_instance;  // borrowed: forward()'s instance, or NULL
  int64_t entry_ns = 0;
  Ref cls;       // the operation class that performs the move
  Ref reverse;   // captured reverse route (differentiable moves)
  Ref prepared;  // PreparedTransfer of a carrier-definition route
  // Strong: Python code (hooks, the operation's __init__) runs before the
  // session is used and may drop every other reference to it.
  Ref session;
  Py_ssize_t count = 0;  // layout cosize
  bool grow = false;     // the empty destination grows to count
  bool record_node = false;
  std::unique_ptr<MoveJob> job;
  bool claimed = false;        // both carriers are owned by the job
  bool submit_failed = true;   // false: a validation failure, not a failed submission

  PyObject* source() const { return as_tensor(tensor)->carrier; }
  PyObject* layout() const { return as_tensor(tensor)->layout; }
};

// The last row of the validation table, decided before the reverse route,
// any claim or prepare(), so a carrier that cannot allocate fails like a
// too-small one: no provider call, no submit event.
int check_capacity(Submission& s) {
  s.count = static_cast<Py_ssize_t>(layout_of(s.layout()).cosize());
  const Py_ssize_t dsize = carrier_size(s.dest);
  if (dsize < 0) return -1;
  const bool growable = can_grow(s.dest);
  return engine_call(
      [&s, dsize, growable] { s.grow = sw::movement::needs_growth(type_name(s.dest), dsize, s.count, growable); });
}

// forward()'s instance performs one move. Taken now, not when the job adopts
// it: hooks run below (prepare, a destination's allocate) and may re-enter
// forward on this instance.
int take_instance(Submission& s) {
  if (!s.op_instance) return 0;
  if (as_move_op(s.op_instance)->used) {
    PyErr_Format(PyExc_RuntimeError, "this %s already performed a move; use a new operation for each move",
                 type_name(s.op_instance));
    return -1;
  }
  as_move_op(s.op_instance)->used = true;
  return 0;
}

void give_back_instance(Submission& s) {
  if (s.op_instance)
    as_move_op(s.op_instance)->used = false;
  else if (s.job && s.job->op)
    as_move_op(s.job->op.get())->used = false;
}

int capture_reverse_route(Submission& s) {
  s.record_node = grad_enabled() && dtype_is_differentiable(as_tensor(s.tensor)->dtype);
  if (!s.record_node) return 0;
  s.reverse.reset(capture_reverse(Py_TYPE(s.source()), Py_TYPE(s.dest)));
  return s.reverse ? 0 : -1;
}

// A carrier-definition route is prepared now, after every validation and
// the claim of both carriers, before anything is allocated; a declined route
// may fall back to the elementwise operation.
int prepare_route(Submission& s) {
  if (!state.route_hooks.prepare) return 0;
  PyObject* prepared = nullptr;
  const int r = state.route_hooks.prepare(s.cls.get(), s.tensor, s.dest, 0, s.op_instance == nullptr, &prepared);
  s.prepared.reset(prepared);
  if (r < 0) return -1;
  if (r == 2) s.cls.reset(Py_NewRef(elementwise_class()));
  return 0;
}

// Ownership first, so nothing else can touch either carrier from here on.
int claim_carriers(Submission& s) {
  MoveJob* j = s.job.get();
  j->src_token = carrier_claim(j->source.get());
  if (j->src_token <= 0) {
    j->src_token = 0;
    return -1;
  }
  j->dst_token = carrier_claim(j->dest.get());
  if (j->dst_token <= 0) {
    j->dst_token = 0;
    return -1;
  }
  s.claimed = true;
  return 0;
}

// An empty destination grows to the layout's cosize.
int grow_destination(Submission& s) {
  if (!s.grow) return 0;
  const int r = carrier_reserve(s.dest, s.count);
  if (r < 0) return -1;
  if (r == 0) {  // can_grow() was wrong about this carrier
    s.submit_failed = false;
    return engine_call([&s] { throw sw::movement::too_small_empty(type_name(s.dest), s.count); });
  }
  return 0;
}

// The operation instance: forward()'s, or a fresh one of the class, bound to
// this move (the autograd node's fields).
int bind_operation(Submission& s) {
  MoveJob* j = s.job.get();
  if (s.op_instance) {
    j->op = Ref::borrow(s.op_instance);
  } else {
    j->op.reset(PyObject_CallNoArgs(s.cls.get()));
    if (!j->op) return -1;
    if (!PyObject_TypeCheck(j->op.get(), &MoveOperation_Type)) {
      PyErr_Format(PyExc_TypeError, "%s() did not create a MoveOperation", class_name(s.cls.get()));
      return -1;
    }
  }
  MoveOperationObject* mo = as_move_op(j->op.get());
  mo->used = true;
  Py_XSETREF(mo->reverse_op, s.reverse.release());
  Py_XSETREF(mo->source_carrier, Py_NewRef(s.source()));
  Py_XSETREF(mo->dest_carrier, Py_NewRef(s.dest));
  Py_XSETREF(mo->source_layout, Py_NewRef(s.layout()));
  return 0;
}

// Creates the job and claims both carriers for it: before prepare(), so
// nothing can write or release a participant while the provider prepares.
int claim_job(Submission& s) {
  s.job.reset(new (std::nothrow) MoveJob());
  if (!s.job) {
    PyErr_NoMemory();
    return -1;
  }
  MoveJob* j = s.job.get();
  j->tensor = Ref::borrow(s.tensor);
  j->source = Ref::borrow(s.source());
  j->dest = Ref::borrow(s.dest);
  j->count = s.count;
  j->record_node = s.record_node;
  j->src_version = as_carrier(s.source())->version;
  j->dst_version = as_carrier(s.dest)->version;
  s.session = Ref::borrow(profiler_current());
  return claim_carriers(s);
}

// Completes the claimed job: grows the destination, creates the output, the
// operation and the handle, and decides how the worker copies. 0 / -1.
int build_job(Submission& s) {
  MoveJob* j = s.job.get();
  if (grow_destination(s) < 0) return -1;
  j->output.reset(tensor_new(s.dest, 0, s.layout()));
  if (!j->output || bind_operation(s) < 0) return -1;
  if (s.prepared)
    j->kind = CopyKind::Provider;
  else if (plan_copy(j) < 0)
    return -1;
  if (s.session) {
    j->session = Ref::borrow(s.session.get());
    PyObject* shape = layout_shape(s.layout());
    if (!shape) return -1;
    j->shapes.reset(PyTuple_Pack(1, shape));
    if (!j->shapes) return -1;
    j->submit_id = profiler_new_id(s.session.get());
  }
  return 0;
}

// The AwaitMove handle, created once the job's path is known (a blocking
// move completed inline needs none). 0 / -1.
int make_handle(Submission& s) {
  s.job->handle.reset(await_new(&AwaitMove_Type));
  return s.job->handle ? 0 : -1;
}

// Records move.submit (keeps a pending exception: a failed provider
// submit() is the handle's, raised from wait()).
void record_submit(Submission& s, int64_t id, PyObject* shapes, bool ok) {
  if (!s.session) return;
  ErrorGuard keep;
  const int64_t now = sw::now_ns();
  profiler_record(s.session.get(), id, profiler_parent_id(s.session.get()), "move.submit",
                  reinterpret_cast<PyObject*>(Py_TYPE(s.source())), s.cls.get(), shapes, s.entry_ns,
                  now - s.entry_ns, current_thread_id(), ok);
}

// Nothing was submitted: undo the claim, leave both carriers as they were
// (a grown empty destination stays allocated), record a failed submit.
PyObject* abandon(Submission& s) {
  give_back_instance(s);
  if (!s.job) return nullptr;
  relinquish_both(s.job.get());
  if (s.claimed) restore_versions(s.job.get());
  if (s.claimed && s.submit_failed && s.session) record_submit(s, profiler_new_id(s.session.get()), nullptr, false);
  s.reverse.reset();
  s.prepared.reset();
  s.session.reset();
  s.cls.reset();
  s.job->drop_refs();
  s.job.reset();
  return nullptr;
}

// The route submits on this thread. From here a failure is the handle's:
// submit() returning None (or raising, or returning no valid completion)
// commits inline; a completion goes to a worker.
PyObject* submit_through_provider(Submission& s) {
  MoveJob* j = s.job.release();
  Ref handle = Ref::borrow(j->handle.get());
  Ref shapes = Ref::borrow(j->shapes.get());
  const int64_t submit_id = j->submit_id;
  j->transfer_start_ns = sw::now_ns();
  j->prepared = std::move(s.prepared);
  const int r = run_provider_submit(j, j->prepared.get());
  if (r == 1 && start_worker(j) < 0) commit(j, false);
  record_submit(s, submit_id, shapes.get(), true);
  if (r != 1) commit(j, r == 0);
  return handle.release();
}

// The worker copies (natively or through _copy) and commits.
PyObject* submit_to_worker(Submission& s) {
  MoveJob* j = s.job.get();
  Ref handle = Ref::borrow(j->handle.get());
  Ref shapes = Ref::borrow(j->shapes.get());
  const int64_t submit_id = j->submit_id;
  j->transfer_start_ns = sw::now_ns();
  if ((commits_in_lane(j) ? start_native_worker(j) : start_worker(j)) < 0) return abandon(s);
  // From here the job belongs to the worker (which may already be done).
  s.job.release();
  record_submit(s, submit_id, shapes.get(), true);
  return handle.release();
}

// Whether the copy completes on this thread (see
// sw::movement::completes_inline).
bool completes_inline(const Submission& s, bool blocking) {
  const MoveJob* j = s.job.get();
  auto exact = [](PyObject* c, PyTypeObject* t) { return Py_TYPE(c) == t; };
  sw::movement::RouteFacts f;
  f.native = j->kind == CopyKind::Native;
  f.profiled = s.session.get() != nullptr;
  f.blocking = blocking;
  f.src_host = exact(j->source.get(), &CPU_Type);
  f.dst_host = exact(j->dest.get(), &CPU_Type);
  f.src_builtin = f.src_host || exact(j->source.get(), &FileBacked_Type);
  f.dst_builtin = f.dst_host || exact(j->dest.get(), &FileBacked_Type);
  f.plan_kind = j->plan.kind();
  f.plan_bytes = j->plan.bytes();
  return sw::movement::completes_inline(f);
}

// Copies and commits on this thread; the handle is terminal on return. For
// a blocking move the result itself is returned (what wait() would return),
// else the handle.
// A blocking move has no handle: nothing could observe it, and the
// commit leaves a failure raised for this caller instead.
PyObject* complete_inline(Submission& s, bool blocking) {
  if (!blocking && make_handle(s) < 0) return abandon(s);
  MoveJob* j = s.job.release();
  Ref handle = Ref::borrow(j->handle.get());
  Ref output = Ref::borrow(j->output.get());
  Ref source = Ref::borrow(j->source.get());
  const int rc = run_plan_inline(j->plan);
  j->plan = sw::CopyPlan();
  commit(j, rc == 0);
  if (!blocking) return handle.release();
  // The commit released the source exactly when it published the output
  // (this thread held the GIL throughout, so nothing else released it).
  if (carrier_is_released(source.get())) return output.release();
  return nullptr;  // the commit left the failure raised
}

// move_async (blocking false: the handle) or move (blocking true: the
// result) with an optional fixed operation, see move_async_impl.
PyObject* submit_move(PyObject* tensor, PyObject* dest, PyObject* op_instance, PyObject* op_class, bool blocking) {
  Submission s(tensor, dest, op_instance);
  s.entry_ns = sw::now_ns();
  PyObject* given = op_instance ? reinterpret_cast<PyObject*>(Py_TYPE(op_instance)) : op_class;
  if (refuse_after_shutdown() < 0) return nullptr;
  if (validate(tensor, dest, given, &s.cls, blocking ? "move" : "move_async") < 0 || check_capacity(s) < 0 ||
      take_instance(s) < 0)
    return nullptr;
  if (capture_reverse_route(s) < 0) {
    give_back_instance(s);
    return nullptr;
  }
  if (claim_job(s) < 0) return abandon(s);
  if (prepare_route(s) < 0) {
    s.submit_failed = false;  // prepare() refused: nothing was submitted
    return abandon(s);
  }
  if (build_job(s) < 0) return abandon(s);
  if (!s.prepared && completes_inline(s, blocking)) return complete_inline(s, blocking);
  if (make_handle(s) < 0) return abandon(s);
  PyObject* handle = s.prepared ? submit_through_provider(s) : submit_to_worker(s);
  return blocking && handle ? wait_handle(handle) : handle;
}

}  // namespace

PyObject* move_async_impl(PyObject* tensor, PyObject* dest, PyObject* op_instance, PyObject* op_class) {
  return submit_move(tensor, dest, op_instance, op_class, false);
}

PyObject* wait_handle(PyObject* handle) {
  Ref h = Ref::steal(handle);
  return PyObject_CallMethod(h.get(), "wait", nullptr);
}

namespace {

constexpr Signature kMoveAsync{"move_async", {"tensor", "destination"}, 2, 0, 2};
constexpr Signature kMove{"move", {"tensor", "destination"}, 2, 0, 2};

PyObject* mod_move_async(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* a[2];
  if (parse_args(kMoveAsync, module_state.keywords.move_async, args, static_cast<size_t>(nargsf), kwnames, a) < 0)
    return nullptr;
  return move_async_impl(a[0], a[1], nullptr, nullptr);
}

PyObject* mod_move(PyObject*, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* a[2];
  if (parse_args(kMove, module_state.keywords.move, args, static_cast<size_t>(nargsf), kwnames, a) < 0)
    return nullptr;
  return move_blocking(a[0], a[1]);
}

PyMethodDef api_methods[] = {
    {"move_async", method_cast(mod_move_async), METH_FASTCALL | METH_KEYWORDS,
     "move_async(tensor, destination)\n--\n\nValidate, initiate one move into destination and return "
     "its handle without waiting for the transfer."},
    {"move", method_cast(mod_move), METH_FASTCALL | METH_KEYWORDS,
     "move(tensor, destination)\n--\n\nmove_async(tensor, destination).wait(): the moved Tensor, backed "
     "by destination at offset 0 with the same Layout; the source carrier is released."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

}  // namespace move_internal

PyObject* move_async(PyObject* tensor, PyObject* destination) {
  return move_internal::move_async_impl(tensor, destination, nullptr, nullptr);
}

PyObject* move_blocking(PyObject* tensor, PyObject* destination) {
  return move_internal::submit_move(tensor, destination, nullptr, nullptr, true);
}

int move_module_init(PyObject* module) {
  using namespace move_internal;
  if (operations_init(module) < 0 || routes_init(module) < 0) return -1;
  if (PyModule_AddFunctions(module, api_methods) < 0) return -1;
  return job_init(module);
}

}  // namespace swpy

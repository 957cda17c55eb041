// The worker side of a move and its terminal commit.
//
// The worker runs the copy (a native plan without the GIL; a Python-level
// _copy with the GIL, grad mode off and owner access to both carriers; or a
// wait on a provider's completion) and then, holding the GIL, performs the
// terminal commit exactly once: publish the result (and its autograd node),
// relinquish ownership, release the source, restore both versions (a move
// is not a write), record move.complete, then mark the handle done. A
// failure leaves the source live and unchanged and publishes nothing.
//
// Moves in flight are counted (sw::movement::JobTracker) so interpreter
// exit can wait for them (a dropped handle still completes) while the
// runtime they need is alive, and a forked child can fail the pending ones.
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "move/internal.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "await_object.hpp"
#include "autograd/autograd.hpp"
#include "profiler_api.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "util/scopes.hpp"
#include "util/gil_gate.hpp"
#include "runtime/clock.hpp"
#include "runtime/executor.hpp"
#include "movement/job_tracker.hpp"

namespace swpy::move_internal {

namespace {

using sw::movement::job_tracker;
using sw::movement::RunningJob;

// Records move.complete; keeps a pending exception.
void record_complete(MoveJob* j, bool ok) {
  if (!j->session) return;
  ErrorGuard keep;
  const int64_t now = sw::now_ns();
  profiler_record(j->session.get(), profiler_new_id(j->session.get()), j->submit_id, "move.complete",
                  reinterpret_cast<PyObject*>(Py_TYPE(j->source.get())),
                  reinterpret_cast<PyObject*>(Py_TYPE(j->op.get())), j->shapes.get(), j->transfer_start_ns,
                  now - j->transfer_start_ns, current_thread_id(), ok);
}

// Attaches the move node: inputs() is (source,), with its version token.
int attach_node(MoveJob* j) {
  Ref inputs = Ref::steal(PyTuple_Pack(1, j->tensor.get()));
  Ref ver = Ref::steal(PyLong_FromUnsignedLongLong(j->src_version));
  Ref versions = Ref::steal(ver ? PyTuple_Pack(1, ver.get()) : nullptr);
  if (!inputs || !versions) return -1;
  OperationObject* o = reinterpret_cast<OperationObject*>(j->op.get());
  Py_XSETREF(o->inputs, inputs.release());
  Py_XSETREF(o->versions, versions.release());
  Py_XSETREF(as_tensor(j->output.get())->autograd_ctx, j->op.new_ref());
  return 0;
}

// OwnerAccess refuses a missing token without raising; the carrier raises
// for a token that is not its owner's.
int no_access() {
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a carrier of this move has no owner token");
  return -1;
}

// Runs body() on this thread the way provider work runs: grad mode off and
// owner access to both carriers, all restored afterwards with any pending
// exception kept. body returns 0 / -1 (or 1, passed through); -1 when access
// could not be taken.
template <class Body>
int with_provider_scope(MoveJob* j, Body&& body) {
  NoGrad no_grad;
  OwnerAccess src(j->source.get(), j->src_token);
  if (!src.ok()) return no_access();
  OwnerAccess dst(j->dest.get(), j->dst_token);
  if (!dst.ok()) return no_access();
  return body();
}

// The worker side of one move.
void run_job(MoveJob* j) {
  std::exception_ptr native_failure;
  if (j->kind == CopyKind::Native) {
    native_failure = run_plan_parallel(j->plan);  // split across the pool when large
    j->plan = sw::CopyPlan();
  }
  PyGILState_STATE g;
  if (!gil_gate::ensure(&g)) {
    // Too late to take the GIL: leave the job's objects to the dying runtime.
    job_tracker().end();
    return;
  }
  bool ok;
  {
    RunningJob running(j);
    if (j->kind == CopyKind::Native) {
      ok = !native_failure || raise_engine_exception(native_failure) == 0;
    } else if (j->kind == CopyKind::Provider) {
      // The provider's completion may wait on other moves (nested work).
      sw::BlockingScope blocked;
      ok = state.route_hooks.wait(j->completion.get()) == 0;
    } else {
      ok = run_python_copy(j) == 0;
    }
  }
  commit(j, ok);
  PyGILState_Release(g);
  job_tracker().end();
}

// ------------------------------------------------------------ module functions

// atexit: let in-flight moves reach their terminal commit (a dropped handle
// still completes) while the runtime they need is still alive, for a bounded
// time (exit_timeout_s) that Ctrl-C cuts short; what is still pending then is
// abandoned with a warning and the process exits. No move starts once this
// runs. Exit is rare and short, so polling keeps this free of locks a fork
// could orphan.
// How long the exit handler lets threads already on their way to the GIL
// get there (each needs only the GIL handed over once).
constexpr double kGateSettleSeconds = 2.0;

PyObject* mod_drain(PyObject*, PyObject*) {
  const double limit = sw::movement::exit_timeout_s(std::getenv("STRIDEWEAVE_EXIT_TIMEOUT"));
  PyThreadState* ts = PyEval_SaveThread();
  const sw::movement::DrainReport report = job_tracker().drain(limit, [&ts] {
    PyEval_RestoreThread(ts);
    // Ctrl-C (or a raising signal handler) ends the wait; exit goes on.
    const bool interrupted = PyErr_CheckSignals() < 0;
    if (interrupted) PyErr_Clear();
    ts = PyEval_SaveThread();
    return !interrupted;
  });
  PyEval_RestoreThread(ts);
  if (report.left != 0) {
    ErrorGuard keep;
    PySys_FormatStderr("%s", report.warning().c_str());
  }
  // From here on a thread coming back for the GIL would be ended by CPython
  // mid-call: shut the gate (util/gil_gate.hpp) while finalization has not
  // begun, and let the threads already on their way through.
  gil_gate::close(kGateSettleSeconds);
  Py_RETURN_NONE;
}

PyObject* mod_in_flight(PyObject*, PyObject*) { return PyLong_FromSize_t(job_tracker().in_flight()); }

PyObject* mod_gil_gate_closed(PyObject*, PyObject*) { return PyBool_FromLong(gil_gate::closed()); }

// os.register_at_fork(after_in_child=...): the parent's pending moves have
// no worker in the child. Each fails there with RuntimeError ("pending at
// fork") and gives both carriers back, so the child's wait() returns and the
// child can use the carriers.
PyObject* mod_after_fork_child(PyObject*, PyObject*) {
  gil_gate::after_fork_child();
  for (void* job : job_tracker().after_fork_child(RunningJob::current())) {
    if (span_batch_after_fork(job)) continue;
    MoveJob* j = static_cast<MoveJob*>(job);
    // A parent worker may have been replacing the plan at the fork: its
    // memory is not the child's to free, so leak it rather than destroy it.
    ::new (&j->plan) sw::CopyPlan();
    PyErr_SetString(PyExc_RuntimeError,
                    "the move was pending at fork: its transfer runs in the parent process only; both carriers "
                    "are given back in this child");
    commit(j, false);
  }
  Py_RETURN_NONE;
}

PyMethodDef job_methods[] = {
    {"_drain_moves", mod_drain, METH_NOARGS, "Block until every in-flight move has completed (used at exit)."},
    {"_moves_in_flight", mod_in_flight, METH_NOARGS, "Number of moves submitted and not yet completed."},
    {"_gil_gate_closed", mod_gil_gate_closed, METH_NOARGS,
     "Whether the exit handler has stopped threads other than the exiting one from taking the GIL back."},
    {"_moves_after_fork_child", mod_after_fork_child, METH_NOARGS, "Forget the parent's pending moves."},
    {nullptr, nullptr, 0, nullptr}};

// atexit.register(module._drain_moves). 0 / -1.
int register_exit_drain(PyObject* module) {
  Ref atexit = Ref::steal(PyImport_ImportModule("atexit"));
  if (!atexit) return -1;
  Ref drain = Ref::steal(PyObject_GetAttrString(module, "_drain_moves"));
  if (!drain) return -1;
  Ref r = Ref::steal(PyObject_CallMethod(atexit.get(), "register", "O", drain.get()));
  return r ? 0 : -1;
}

// os.register_at_fork(after_in_child=module._moves_after_fork_child). 0 / -1.
int register_fork_reset(PyObject* module) {
  Ref os = Ref::steal(PyImport_ImportModule("os"));
  if (!os) return -1;
  Ref child = Ref::steal(PyObject_GetAttrString(module, "_moves_after_fork_child"));
  if (!child) return -1;
  Ref reg = Ref::steal(PyObject_GetAttrString(os.get(), "register_at_fork"));
  if (!reg) return -1;
  Ref kw = Ref::steal(Py_BuildValue("{s:O}", "after_in_child", child.get()));
  if (!kw) return -1;
  Ref no_args = Ref::steal(PyTuple_New(0));
  if (!no_args) return -1;
  Ref r = Ref::steal(PyObject_Call(reg.get(), no_args.get(), kw.get()));
  return r ? 0 : -1;
}

}  // namespace

void MoveJob::drop_refs() {
  op.reset();
  tensor.reset();
  source.reset();
  dest.reset();
  output.reset();
  handle.reset();
  session.reset();
  shapes.reset();
  completion.reset();
  prepared.reset();
}

void relinquish_both(MoveJob* j) {
  ErrorGuard keep;
  if (j->src_token && carrier_relinquish(j->source.get(), j->src_token) < 0) PyErr_Clear();
  if (j->dst_token && carrier_relinquish(j->dest.get(), j->dst_token) < 0) PyErr_Clear();
  j->src_token = j->dst_token = 0;
}

void restore_versions(MoveJob* j) {
  as_carrier(j->source.get())->version = j->src_version;
  as_carrier(j->dest.get())->version = j->dst_version;
}

void commit(MoveJob* j, bool ok) {
  job_tracker().untrack(j);
  // Publish the result (and its node), then give ownership back and
  // release the source, then record success.
  if (ok && j->record_node && attach_node(j) < 0) ok = false;
  // Versions first, while both carriers are still owned: once they are
  // given back (the source's release may run Python code) other threads may
  // write the destination, and a later restore would erase that bump.
  restore_versions(j);
  relinquish_both(j);
  if (ok && carrier_release(j->source.get()) < 0) {
    ok = false;
    Py_CLEAR(as_tensor(j->output.get())->autograd_ctx);
  }
  if (!ok && j->record_node) {
    // Nothing is published: the node must not claim the source either.
    ErrorGuard keep;
    OperationObject* o = reinterpret_cast<OperationObject*>(j->op.get());
    Py_CLEAR(o->inputs);
    Py_CLEAR(o->versions);
  }
  record_complete(j, ok);
  if (!j->handle) {
    // A blocking move completed inline (api.cpp): its caller raises the
    // failure that the handle would have recorded.
    if (!ok && !PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "the operation failed without an exception");
    ErrorGuard keep;
    j->drop_refs();
  } else {
    if (ok)
      await_complete(j->handle.get(), j->output.get());
    else
      await_fail(j->handle.get());
    j->drop_refs();
  }
  delete j;
}

int run_python_copy(MoveJob* j) {
  return with_provider_scope(j, [j]() {
    Ref r = Ref::steal(PyObject_CallMethod(j->op.get(), "_copy", "OOOn", j->tensor.get(), j->dest.get(),
                                           j->output.get(), j->count));
    if (!r) return -1;
    if (r.get() != Py_None) {
      PyErr_Format(PyExc_TypeError, "%s._copy() must return None, not %.100s", type_name(j->op.get()),
                   type_name(r.get()));
      return -1;
    }
    return 0;
  });
}

int run_provider_submit(MoveJob* j, PyObject* prepared) {
  return with_provider_scope(j, [j, prepared]() {
    PyObject* completion = nullptr;
    const int r = state.route_hooks.submit(prepared, &completion);
    j->completion.reset(completion);
    return r;
  });
}

int plan_copy(MoveJob* j) {
  Ref copy = Ref::steal(PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(j->op.get())), state.copy_name));
  if (!copy) return -1;
  TensorObject* t = as_tensor(j->tensor.get());
  const sw::Layout& l = layout_of(t->layout);
  if (copy.get() == state.elementwise_copy)
    j->plan = plan_logical(j->source.get(), t->offset, l, j->dest.get(), 0, l);
  else if (copy.get() == state.bulk_copy_c2f || copy.get() == state.bulk_copy_f2c)
    j->plan = plan_span(j->source.get(), t->offset, j->dest.get(), 0, j->count);
  else
    j->plan = sw::CopyPlan();
  j->kind = j->plan.native() ? CopyKind::Native : CopyKind::Python;
  return 0;
}

int64_t running_move_token(PyObject* c) {
  const MoveJob* j = static_cast<const MoveJob*>(RunningJob::current());
  if (!j) return 0;
  if (c == j->source.get()) return j->src_token;
  if (c == j->dest.get()) return j->dst_token;
  return 0;
}

int refuse_after_shutdown() {
  return engine_call([] { job_tracker().check_accepting(); });
}

int start_worker(MoveJob* j) {
  return engine_call([j] { job_tracker().launch(j, true, [j] { run_job(j); }); });
}

int job_init(PyObject* module) {
  if (PyModule_AddFunctions(module, job_methods) < 0) return -1;
  gil_gate::init();
  // Wait for pending moves at interpreter exit (see mod_drain); forget the
  // parent's in a forked child.
  if (register_exit_drain(module) < 0 || register_fork_reset(module) < 0) return -1;
  return 0;
}

}  // namespace swpy::move_internal

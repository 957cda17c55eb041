// What the files of the move family share and nobody else needs:
//   api.cpp         move / move_async: validation in the spec's order and
//                   submission (move_async_impl and its steps)
//   job.cpp         MoveJob: the worker side, the terminal commit, the
//                   provider scope, the exit drain and fork reset (their
//                   bookkeeping: sw::movement::JobTracker)
//   routes.cpp      legacy registry (sw::movement::RouteTable), pins,
//                   route resolution, registered_move_operation
//   operations.cpp  the MoveOperation type family, built-in _copy methods,
//                   MoveOperation.backward
//   copy.cpp        copy planning as the binding sees it: describe both
//                   carriers to the engine, run its plan, or copy value by
//                   value
//   lowered.cpp     move_lowered (Evictable residency)
//   commit_lane.cpp native copies between built-in carriers: copied on a
//                   worker, committed in batches by one GIL holder
//                   (sw::movement::CommitLane)
// What decides capacity and where a transfer runs is the engine's
// (movement/submit_policy.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>

#include "move/move.hpp"
#include "module_state.hpp"
#include "transfer/copy_plan.hpp"
#include "movement/route_table.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"

namespace swpy::move_internal {

// The family's globals live in ModuleState (module_state.hpp).
inline MoveState& state = module_state.move;

// ------------------------------------------------------------ copy.cpp

// The native plan for copying count slots src[src_off...] ->
// dst[dst_off...] (None when the carriers are not both native, of one
// dtype).
sw::CopyPlan plan_span(PyObject* src, Py_ssize_t src_off, PyObject* dst, Py_ssize_t dst_off, Py_ssize_t count);
// The native plan for the logical elements of src_layout at src_off into the
// same coordinates of dst_layout at dst_off (see sw::CopyPlan::logical).
sw::CopyPlan plan_logical(PyObject* src, Py_ssize_t src_off, const sw::Layout& src_layout, PyObject* dst,
                          Py_ssize_t dst_off, const sw::Layout& dst_layout);
// Runs a native plan with the GIL released / held. 0 / -1 with the engine's
// exception translated.
int run_plan_unlocked(const sw::CopyPlan& plan);
int run_plan_locked(const sw::CopyPlan& plan);
// Copies up to this size run with the GIL held (releasing and retaking it
// costs more than the copy).
constexpr int64_t kLockedCopyBytes = int64_t(64) << 10;
// A move's native copy on this thread: small ones with the GIL held, larger
// ones with it released and split across the worker pool. 0 / -1.
int run_plan_inline(const sw::CopyPlan& plan);
// The worker's native copy: split across the pool when large. What it
// threw, or null.
std::exception_ptr run_plan_parallel(const sw::CopyPlan& plan) noexcept;
// The Python-level logical copy through the carriers' slot entry points
// (framework writes: no mutability check, no version bump); slots no
// coordinate reaches keep their values. 0 / -1.
int copy_values(PyObject* src, Py_ssize_t src_off, const sw::Layout& src_layout, PyObject* dst, Py_ssize_t dst_off,
                const sw::Layout& dst_layout);

// ------------------------------------------------------------ job.cpp

// How the worker copies. Provider: a carrier-definition route whose
// submit() returned a ProviderCompletion; the worker waits on it.
enum class CopyKind { Native, Python, Provider };

// One submitted move. Owned by the worker job once submitted; every
// reference is dropped at the end of the terminal commit, under the GIL.
struct MoveJob {
  Ref op;          // MoveOperation instance (the autograd node)
  Ref tensor;      // source Tensor
  Ref source;      // its carrier
  Ref dest;        // destination carrier
  Ref output;      // result Tensor (published on success)
  Ref handle;      // AwaitMove (none for a blocking move completed inline)
  Ref session;     // profiler session or NULL
  Ref shapes;      // (shape,) for profiling
  Ref completion;  // ProviderCompletion (CopyKind::Provider)
  // The route's PreparedTransfer: every provider resource stays valid until
  // the terminal commit, including what only its closure holds.
  Ref prepared;
  int64_t src_token = 0, dst_token = 0;
  uint64_t src_version = 0, dst_version = 0;
  Py_ssize_t count = 0;  // layout cosize
  bool record_node = false;
  CopyKind kind = CopyKind::Python;
  sw::CopyPlan plan;
  int64_t submit_id = 0;
  int64_t transfer_start_ns = 0;

  // Drops every reference (GIL held), in a fixed order.
  void drop_refs();
};

// Gives back ownership of both carriers. Keeps a pending exception.
void relinquish_both(MoveJob* j);
// Puts both carriers' versions back: a move is not a write.
void restore_versions(MoveJob* j);
// Chooses how the worker copies: natively (the operation's _copy is a
// built-in one and the carriers are native) or by calling _copy. 0 / -1.
int plan_copy(MoveJob* j);
// Calls op._copy(tensor, destination, output, element_count) with grad mode
// off and owner access to both carriers. 0 / -1.
int run_python_copy(MoveJob* j);
// Runs a route's PreparedTransfer.submit() on this thread in the provider
// scope. 0 finished, 1 with j->completion set, -1 with an exception set.
int run_provider_submit(MoveJob* j, PyObject* prepared);
// Hands j to a worker thread (counted in flight). 0, or -1 with
// RuntimeError set and j still the caller's.
int start_worker(MoveJob* j);
// RuntimeError once interpreter shutdown has begun (the exit drain runs):
// no new move starts then. 0 / -1.
int refuse_after_shutdown();
// On a move worker running that move's _copy: the move's ownership token
// of c when c is one of its two carriers, else 0 (see
// sw::movement::copy_access).
int64_t running_move_token(PyObject* c);
// The terminal commit, exactly once, with the GIL held. ok: the transfer
// succeeded; otherwise its exception is set. Consumes j. Without a handle
// a failure stays raised on return.
void commit(MoveJob* j, bool ok);

// ------------------------------------------------------------ spans.cpp

// In a forked child: fails job when it is a pending span batch (its
// terminal callback runs with RuntimeError "pending at fork") and returns
// true; false when job is not one (a MoveJob).
bool span_batch_after_fork(void* job);

// ------------------------------------------------------------ commit_lane.cpp

// Whether j's commit runs no Python code (a native copy between exact
// built-in carriers), so it can go through the commit lane.
bool commits_in_lane(const MoveJob* j);
// start_worker for such a job: the worker copies, then the lane commits. 0,
// or -1 with RuntimeError set and j still the caller's.
int start_native_worker(MoveJob* j);

// ------------------------------------------------------------ routes.cpp

// TypeError when op_class pins a carrier class the pair does not match.
int check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst);
// The exact pair's operation class with its pins checked (move_resolve_route
// then check_pins), remembered for pairs of built-in classes until the
// registry changes. New reference or NULL.
PyObject* resolve_checked(PyTypeObject* src, PyTypeObject* dst);
// The remembered class of a pair (borrowed), or NULL (no exception set).
PyObject* cached_route(PyTypeObject* src, PyTypeObject* dst);
// Remembers op (pins checked) for the pair when the pair and op are all
// built-in classes.
void remember_route(PyTypeObject* src, PyTypeObject* dst, PyObject* op);

// ------------------------------------------------------------ api.cpp

// move_async with an optional fixed operation: op_instance (MoveOperation.
// forward on that instance) or op_class (backward's captured route), else
// the route is resolved. A differentiable source in grad mode records the
// move node. New reference to the AwaitMove handle, or NULL.
PyObject* move_async_impl(PyObject* tensor, PyObject* dest, PyObject* op_instance, PyObject* op_class);
// handle.wait(), consuming handle.
PyObject* wait_handle(PyObject* handle);

// ------------------------------------------------------------ init
// Called by move_module_init in this order.
int operations_init(PyObject* module);
int routes_init(PyObject* module);
int job_init(PyObject* module);

inline MoveOperationObject* as_move_op(PyObject* o) { return reinterpret_cast<MoveOperationObject*>(o); }

}  // namespace swpy::move_internal

// The move family's declarations for the rest of the binding layer:
// the MoveOperation object layout and types, move/move_async, route
// resolution (with the hooks extension.cpp installs) and move_lowered
// (Evictable residency). What only the move files share is in
// move/internal.hpp.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "autograd/autograd.hpp"
#include "layout/layout.hpp"

namespace swpy {

// MoveOperation is the open base of every move operation and of the
// autograd node a differentiable move attaches.
struct MoveOperationObject {
  OperationObject base;
  PyObject* reverse_op;      // captured reverse route (operation class) or NULL
  PyObject* source_carrier;  // forward source carrier (allocate_like at backward)
  PyObject* dest_carrier;    // forward destination carrier (staging at backward)
  PyObject* source_layout;   // forward layout
  bool used;                 // this instance has run (or is running) a move
};
extern PyTypeObject MoveOperation_Type;
extern PyTypeObject ElementwiseMoveOperation_Type;
extern PyTypeObject CpuToFileBackedMoveOperation_Type;
extern PyTypeObject FileBackedToCpuMoveOperation_Type;
// Adds a built-in exact-pair entry to the legacy registry (metal.cpp calls it
// from its init for its three operations). ValueError on a duplicate. 0 / -1.
int move_register_builtin(PyTypeObject* src, PyTypeObject* dst, PyTypeObject* op);
// move_async(tensor, destination) and move(...) for other binding files.
PyObject* move_async(PyObject* tensor, PyObject* destination);
PyObject* move_blocking(PyObject* tensor, PyObject* destination);
// Route resolution for carrier definitions (extension.cpp sets these at
// init; all NULL means every pair is governed by the legacy registry).
//  legacy_check: called by every legacy registry API after the Carrier-class
//    checks; -1 with RuntimeError ("TransferRoute") when either exact class
//    is definition-backed (it may also mark the classes observed), else 0.
//  resolve: for move/move_async and reverse-route capture. 1 with *op_class a
//    new reference to the MoveOperation subclass that performs the pair;
//    0 when the legacy registry governs the pair; -1 with an exception
//    (NotImplementedError naming both classes when nothing is permitted).
//  prepare: called by move_async after every validation (and the reverse-
//    route capture) and after ownership of both carriers is claimed (so no
//    one else can write or release them meanwhile), before anything is
//    allocated. dest_offset: the slot of dest the span lands at (0 for a
//    move; a tile transfer writes into the middle of a tier).
//    For a route operation class it runs TransferProvider.prepare (grad
//    mode off): 1 with *prepared a new reference to the PreparedTransfer;
//    2 when the provider declined and the elementwise fallback is permitted
//    (only when allow_fallback); 0 when op_class is not a route class; -1
//    with an exception (raised from move_async).
//  submit: runs PreparedTransfer.submit() (the caller holds owner access to
//    both carriers and has grad mode off): 0 finished inline; 1 with
//    *completion a new reference to a validated ProviderCompletion; -1 with
//    an exception (the handle's failure).
//  wait: blocks in completion.wait() (GIL held, on a worker). 0 / -1.
struct MoveRouteHooks {
  int (*legacy_check)(PyTypeObject* src, PyTypeObject* dst);
  int (*resolve)(PyTypeObject* src, PyTypeObject* dst, PyObject** op_class);
  int (*prepare)(PyObject* op_class, PyObject* tensor, PyObject* dest, Py_ssize_t dest_offset, bool allow_fallback,
                 PyObject** prepared);
  int (*submit)(PyObject* prepared, PyObject** completion);
  int (*wait)(PyObject* completion);
};
// The hooks live in the move family's state (move/internal.hpp); this name
// is how extension.cpp installs them.
extern MoveRouteHooks& move_route_hooks;
// Exact-pair resolution as move uses it (hooks first, then the legacy
// registry, then ElementwiseMoveOperation). New reference or NULL.
PyObject* move_resolve_route(PyTypeObject* src, PyTypeObject* dst);
// TypeError ("dtype must match", naming both dtypes and the fix) unless
// carrier dest's dtype is the tensor's: move's check, shared by every
// built-in _copy (a direct call must not copy Int32 bits into Float32
// slots). 0 / -1.
int move_check_dtype(PyObject* tensor, PyObject* dest);
// TypeError naming op_class and the required class when op_class pins a
// source_class/destination_class the (src, dst) pair does not match. 0 / -1.
int move_check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst);
// Framework-owned ("lowered") transfer for a carrier that owns both ends
// (evictable.cpp: eviction and promotion). Resolves the exact-pair route as
// move does (move_resolve_route, pins checked), grows an empty destination
// to layout.cosize, and runs the transfer synchronously on this thread with
// grad mode off; a Python _copy gets owner access through src_token /
// dst_token, the caller's ownership tokens of both carriers. No ownership
// validation or claims, no autograd node, no profiling events, no source
// release; both versions stay as they were. New reference to the result
// Tensor over destination at offset 0, or NULL.
PyObject* move_lowered(PyObject* tensor, PyObject* destination, int64_t src_token, int64_t dst_token);

// ------------------------------------------------------------ span batches (spans.cpp)
//
// Framework-owned copies between carriers that a framework carrier owns
// (TiledEvictable's tile transfers), run asynchronously like moves: each
// span copy resolves its exact pair as move does (carrier-definition routes,
// incoming routes, the legacy registry, the elementwise fallback); native
// copies run on a worker without the GIL, a Python _copy or a route's
// prepare/submit/wait with the GIL, grad mode off and owner access to the
// carriers the batch was given tokens for. A batch is tracked with the moves:
// the exit drain waits for it (STRIDEWEAVE_EXIT_TIMEOUT, Ctrl-C) and in a
// forked child it fails ("pending at fork"). Each transfer is profiled as a
// move.submit (recorded when it is added, on the calling thread) and
// move.complete pair (on the thread that finishes its last copy).
struct SpanCopy {
  PyObject* src = nullptr;  // borrowed: the batch keeps both alive
  Py_ssize_t src_off = 0;
  PyObject* dst = nullptr;
  Py_ssize_t dst_off = 0;
  // A span of count slots (layouts unset), or a logical copy of src_layout
  // at src_off into the same coordinates of dst_layout at dst_off.
  Py_ssize_t count = 0;
  bool logical = false;
  sw::Layout src_layout, dst_layout;
  // dst = dst + src (logical; scatter-add) instead of dst = src.
  bool add = false;
  // dst = 0 over the span (count slots), src unused.
  bool zero = false;
  int transfer = -1;  // the profiled transfer it belongs to
};

class SpanBatch {
 public:
  // Terminal callback, GIL held, exactly once: ok, or the batch's failure
  // raised (the callback consumes it).
  using Done = std::function<void(bool ok)>;

  SpanBatch();
  ~SpanBatch();
  SpanBatch(const SpanBatch&) = delete;
  SpanBatch& operator=(const SpanBatch&) = delete;
  // A new unit: its copies run in order on one thread; units run
  // independently. Returns its index.
  int unit();
  // Adds c to unit u. 0 / -1 (memory).
  int add(int u, const SpanCopy& c);
  // Keeps o alive until the terminal callback ran. 0 / -1.
  int keep(PyObject* o);
  // Owner access to c (kept alive by the caller or keep()) through token
  // for the Python-level copies. 0 / -1.
  int access(PyObject* c, int64_t token);
  // A profiled transfer from a carrier of src_class through impl (shapes:
  // the tuple recorded with it, or NULL); move.submit is recorded now when
  // this thread profiles. Its index, or -1 with an exception.
  int transfer(PyObject* src_class, PyObject* impl, PyObject* shapes);
  // Whether any unit was added.
  bool empty() const;
  // The distinct carriers the copies added so far read or write.
  std::vector<PyObject*> carriers() const;
  // The operation class a span between these classes resolves to (as move
  // resolves it; pins checked). New reference or NULL.
  static PyObject* route(PyTypeObject* src, PyTypeObject* dst);

  Done done;

  struct Impl;
  std::unique_ptr<Impl> impl;
};

// Starts b: every native unit on one worker job, every other unit on its
// own, and, with handle (an AwaitResult), an untimed wait() on it runs the
// units no worker has started on the waiting thread. Tracked with the
// moves. A batch without units finishes here (done runs before this
// returns). 0 / -1 with RuntimeError (shutdown began, no worker): nothing
// ran and done is not called.
int span_batch_start(std::shared_ptr<SpanBatch> b, PyObject* handle);
// Runs every unit of b on this thread, in order (native ones with the GIL
// released), untracked and unprofiled, and without the terminal callback:
// the framework's synchronous transfers (a slot write's promotion, a policy
// eviction at commit). 0 / -1 with the first failure raised.
int span_batch_run_here(SpanBatch& b);

}  // namespace swpy

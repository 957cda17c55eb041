// The move family's declarations for the rest of the binding layer:
// the MoveOperation object layout and types, move/move_async, route
// resolution (with the hooks extension.cpp installs) and move_lowered
// (Evictable residency). What only the move files share is in
// move/internal.hpp.
#pragma once
#include "autograd/autograd.hpp"

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
//    allocated.
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
  int (*prepare)(PyObject* op_class, PyObject* tensor, PyObject* dest, bool allow_fallback, PyObject** prepared);
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

}  // namespace swpy

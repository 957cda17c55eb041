// The binding layer's shared declarations: object layouts of every native
// type and the internal C++ API the files of csrc/python call on each other.
// Conventions: functions returning PyObject* return a new reference or NULL
// with an exception set; functions returning int return -1 with an exception
// set on failure. Everything here is called with the GIL held.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cstdint>

#include "clock.hpp"
#include "dtype.hpp"
#include "executor.hpp"
#include "layout.hpp"
#include "ownership.hpp"
#include "slot_values.hpp"
#include "storage.hpp"
#include "util/compat.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/scopes.hpp"

namespace swpy {

// Adds a type to the module under its name (PyType_Ready included).
int add_type(PyObject* module, PyTypeObject* type, const char* name);

// One init function per file, called by module.cpp in this order; each
// readies its types and adds its public names to the module.
#define SW_MODULE_INITS(X) \
  X(dtype) X(shape) X(layout) X(carrier) X(cpu) X(generic) X(file_backed) \
  X(tensor) X(representation) X(operation) X(ops) X(autograd) X(dlpack) \
  X(await) X(move) X(evictable) X(metal) X(extension) X(profiler)
#define SW_DECLARE_INIT(name) int name##_module_init(PyObject* module);
SW_MODULE_INITS(SW_DECLARE_INIT)
#undef SW_DECLARE_INIT

// ---------------------------------------------------------------- dtype.cpp
struct DTypeObject {
  PyObject_HEAD
  sw::DTypeCode code;
  const char* name;          // static string for built-ins
  PyObject* simple_types;    // tuple of simple DType for compound; else NULL
};
extern PyTypeObject DType_Type;
extern PyTypeObject CompoundDType_Type;
bool is_dtype(PyObject* o);
// Borrowed reference to the built-in singleton.
PyObject* dtype_singleton(sw::DTypeCode code);
inline sw::DTypeCode dtype_code(PyObject* d) { return reinterpret_cast<DTypeObject*>(d)->code; }
// True for Float32, Float64 and Floating (differentiable dtypes).
bool dtype_is_differentiable(PyObject* d);

// ------------------------------------------------- shape.cpp, layout.cpp
// Shape and Stride share one object layout (an IntTree root node).
struct IntTreeObject {
  PyObject_HEAD
  sw::IntTree tree;
};
extern PyTypeObject Shape_Type;
extern PyTypeObject Stride_Type;
PyObject* shape_from_tree(const sw::IntTree& t);
PyObject* stride_from_tree(const sw::IntTree& t);
inline const sw::IntTree& tree_of(PyObject* o) { return reinterpret_cast<IntTreeObject*>(o)->tree; }

struct LayoutObject {
  PyObject_HEAD
  PyObject* shape;   // the Shape object given (identity kept)
  PyObject* stride;  // the Stride object given
  sw::Layout layout;
};
extern PyTypeObject Layout_Type;
inline bool is_layout(PyObject* o) { return PyObject_TypeCheck(o, &Layout_Type); }
inline const sw::Layout& layout_of(PyObject* o) { return reinterpret_cast<LayoutObject*>(o)->layout; }
// New Layout object (with fresh Shape/Stride objects) for an engine layout.
PyObject* layout_from_engine(const sw::Layout& l);
// Parses a key as API.md section 2 describes into a scalar index.
int layout_index_from_key(PyObject* layout, PyObject* key, int64_t* out_index);

// -------------------------------------------------------------- carrier.cpp
struct CarrierObject;

// Native behaviour of a built-in carrier class. Python subclasses of the
// bare Carrier have no vtable and are driven entirely by their hooks.
// Functions do no state checks (released, mutability, range): the base does.
struct CarrierVTable {
  sw::DTypeCode (*dtype_code)(CarrierObject*);     // storage dtype
  Py_ssize_t (*size)(CarrierObject*);
  PyObject* (*get)(CarrierObject*, Py_ssize_t i);  // in range
  int (*set)(CarrierObject*, Py_ssize_t i, PyObject* v);  // converts/validates v
  void (*release)(CarrierObject*);                 // free storage
  PyObject* (*new_like)(CarrierObject*, PyObject* values, bool mutable_, PyObject* dtype);
  PyObject* (*allocate_like)(CarrierObject*, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty);
  // Grows an empty destination to n slots. 1 when done, 0 when it declines,
  // -1 on error. NULL for a carrier that can never allocate (fixed size).
  int (*reserve)(CarrierObject*, Py_ssize_t n);
  // Host address of slot 0 for carriers whose storage is host memory of a
  // native dtype (CPU); NULL otherwise.
  void* (*host_data)(CarrierObject*);
  // Builds the dlpack_info dict; NULL means "no DLPack" (base BufferError).
  PyObject* (*dlpack_info)(CarrierObject*);
};

struct CarrierObject {
  PyObject_HEAD
  PyObject* weakreflist;
  const CarrierVTable* vt;     // NULL for Python subclasses of Carrier
  uint64_t version;
  sw::Ownership ownership;
  bool released;               // built-ins: storage relinquished
  bool constructed_mutable;    // built-ins
  bool releasing;              // a Python _release hook is running
};
extern PyTypeObject Carrier_Type;
inline bool is_carrier(PyObject* o) { return PyObject_TypeCheck(o, &Carrier_Type); }
inline CarrierObject* as_carrier(PyObject* o) { return reinterpret_cast<CarrierObject*>(o); }

uint64_t current_thread_id();
// True when a Python class in type(self)'s MRO, before the first native
// class, defines name (a Python override of a hook).
bool carrier_overrides(PyObject* self, const char* name);

Py_ssize_t carrier_size(PyObject* c);          // -1 on error
PyObject* carrier_dtype(PyObject* c);           // new ref to a DType
int carrier_is_released(PyObject* c);
int carrier_is_mutable(PyObject* c);            // public mutability
int carrier_is_owned(PyObject* c);
PyObject* carrier_get(PyObject* c, Py_ssize_t i);            // released/range checks
int carrier_set(PyObject* c, Py_ssize_t i, PyObject* v);     // + mutability, version += 1
// Write without the mutability check or version bump: for framework-owned
// work (move destinations, freshly allocated results) only.
int carrier_set_unchecked(PyObject* c, Py_ssize_t i, PyObject* v);
int carrier_release(PyObject* c);
PyObject* carrier_new_like(PyObject* c, PyObject* values, bool mutable_, PyObject* dtype /*nullable*/);
PyObject* carrier_allocate_like(PyObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype /*nullable*/, bool empty);
int carrier_reserve(PyObject* c, Py_ssize_t n);  // see CarrierVTable::reserve
void* carrier_host_data(PyObject* c);            // NULL unless native host memory
PyObject* carrier_dlpack_info(PyObject* c);      // calls the hook
// Ownership (the _claim_ownership family); 0 / -1 with RuntimeError set.
int64_t carrier_claim(PyObject* c);
int carrier_relinquish(PyObject* c, int64_t token);
int carrier_begin_access(PyObject* c, int64_t token);
int carrier_end_access(PyObject* c, int64_t token);
// For native carrier subclasses (cpu.cpp, evictable.cpp, ...): tp_alloc of
// type with the base part initialised (version 0, unowned, live, constructed
// mutable, vt set). The subclass then placement-constructs its own members.
PyObject* carrier_alloc(PyTypeObject* type, const CarrierVTable* vt);
// Finalises the base part (weakrefs, ownership) and calls tp_free: the last
// call of a native subclass's tp_dealloc (GC types untrack first).
void carrier_dealloc(PyObject* self);
// Built-in carrier types (cpu.cpp, generic.cpp, file_backed.cpp,
// evictable.cpp, metal.cpp).
extern PyTypeObject CPU_Type;
extern PyTypeObject Generic_Type;
extern PyTypeObject FileBacked_Type;
extern PyTypeObject Evictable_Type;
extern PyTypeObject Metal_Type;
// Native host storage of a CPU carrier (for kernels and DLPack).
struct CPUObject {
  CarrierObject base;
  sw::AlignedBuffer buffer;
  Py_ssize_t size;
  sw::DTypeCode dtype;
};
struct GenericObject {
  CarrierObject base;
  PyObject* values;   // list
  PyObject* dtype;
};
struct FileBackedObject {
  CarrierObject base;
  sw::FileStorage file;
  PyObject* dtype;
  PyObject* path;       // str: the file's full path (kept after release)
  Py_ssize_t size;
  bool user_directory;  // in a directory= the caller named (not the per-process one)
};
struct EvictableObject {
  CarrierObject base;
  PyObject* primary;
  PyObject* secondary;
  int64_t primary_token;
  int64_t secondary_token;
  bool evicted;
};
// Creates a CPU carrier directly (kernels, gradients). empty skips zeroing.
PyObject* cpu_new(Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty);

// --------------------------------------------------------------- tensor.cpp
struct TensorObject {
  PyObject_HEAD
  PyObject* weakreflist;
  PyObject* carrier;
  Py_ssize_t offset;
  PyObject* layout;
  PyObject* dtype;           // logical dtype
  PyObject* representation;  // TensorRepresentation for multi-subtensor; else NULL
  PyObject* autograd_ctx;    // Operation or NULL
  PyObject* grad;            // Tensor or NULL
  bool retains_grad;
};
extern PyTypeObject Tensor_Type;
inline bool is_tensor(PyObject* o) { return PyObject_TypeCheck(o, &Tensor_Type); }
inline TensorObject* as_tensor(PyObject* o) { return reinterpret_cast<TensorObject*>(o); }
// Validating constructor (same checks as Tensor(...)).
PyObject* tensor_new(PyObject* carrier, Py_ssize_t offset, PyObject* layout);
// True for a multi-subtensor tensor.
inline bool tensor_is_multi(PyObject* t) { return as_tensor(t)->representation != nullptr; }
// Raises NotImplementedError("Multi-subtensor Tensor <reason> is not
// implemented ...") and returns -1 for a multi-subtensor tensor; else 0.
int tensor_reject_multi(PyObject* t, const char* reason);

// --------------------------------------------- operation.cpp, ops.cpp, autograd.cpp
bool grad_enabled();
void set_grad_enabled(bool on);
struct OperationObject {
  PyObject_HEAD
  PyObject* dict;
  PyObject* weakreflist;
  PyObject* inputs;     // tuple of saved Tensor inputs, or NULL
  PyObject* versions;   // tuple of version tokens, or NULL
  bool graph_freed;     // a backward pass without retain_graph freed it
};
extern PyTypeObject Operation_Type;
inline bool is_operation(PyObject* o) { return PyObject_TypeCheck(o, &Operation_Type); }
// Operation.forward(*args) as the base implements it: runs _forward, records
// the profiler event and, in grad mode with a differentiable Tensor input,
// saves the inputs and sets result.autograd_ctx. args is a tuple.
PyObject* operation_forward(PyObject* op, PyObject* args);
// Gradient layout rule (autograd.cpp): a tensor's own layout when injective,
// else the canonical layout of its shape.
sw::Layout grad_layout_for(const sw::Layout& l);
// Checks the cotangent layout contract for gradient g of tensor target
// (TypeError: not a Tensor or not differentiable; RuntimeError: released;
// ValueError: shape/layout). 0 / -1.
int autograd_check_cotangent(PyObject* target, PyObject* g);
// Tensor methods implemented by autograd.cpp.
PyObject* tensor_backward(PyObject* self, PyObject* args, PyObject* kwargs);
// Fresh host storage of n slots of dtype in like's exact class (CPU, or its
// allocate_like for subclasses); *data receives its host pointer. ops.cpp.
PyObject* ops_alloc_host(PyObject* like, Py_ssize_t n, sw::DTypeCode dtype, bool zero, void** data);
PyObject* tensor_add(PyObject* a, PyObject* b);
PyObject* tensor_mul(PyObject* a, PyObject* b);
PyObject* tensor_neg(PyObject* a);

// --------------------------------------------------------------- dlpack.cpp
PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kwargs);
// Same method for a METH_FASTCALL | METH_KEYWORDS table entry: skips the
// kwargs dict CPython builds for METH_VARARGS, which dominates export cost.
PyObject* tensor_dlpack_fastcall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused);

// -------------------------------------------------- move.cpp, await.cpp
// Completion handles (await.cpp). AwaitResult is the read-only base of every
// framework-created handle (AwaitMove here; AwaitProjection/AwaitResidency
// later subclass it natively). The terminal outcome is written once, with the
// GIL held, before the completion is set, so a waiter that sees it set reads
// a stable result/error.
struct AwaitObject {
  PyObject_HEAD
  PyObject* weakreflist;
  sw::Completion* completion;  // owned
  PyObject* result;            // terminal value on success
  PyObject* error;             // terminal exception instance on failure
};
extern PyTypeObject AwaitResult_Type;
extern PyTypeObject AwaitMove_Type;
extern PyTypeObject AwaitProjection_Type;  // TiledEvictable (later work)
extern PyTypeObject AwaitResidency_Type;
inline bool is_await(PyObject* o) { return PyObject_TypeCheck(o, &AwaitResult_Type); }
// A fresh pending handle of type (AwaitResult_Type or a native subclass).
PyObject* await_new(PyTypeObject* type);
// Records success with value (a new reference is taken) and wakes every
// waiter. 1 when this call made the terminal transition, 0 when the handle
// was already terminal (nothing changes).
int await_complete(PyObject* handle, PyObject* value);
// Records failure with the currently raised exception, which is consumed
// (cleared). 1 / 0 as await_complete.
int await_fail(PyObject* handle);
bool await_done(PyObject* handle);

// Movement (move.cpp). MoveOperation is the open base of every move
// operation and of the autograd node a differentiable move attaches.
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
// init; both NULL means every pair is governed by the legacy registry).
//  legacy_check: called by every legacy registry API after the Carrier-class
//    checks; -1 with RuntimeError ("TransferRoute") when either exact class
//    is definition-backed (it may also mark the classes observed), else 0.
//  resolve: for move/move_async and reverse-route capture. 1 with *op_class a
//    new reference to the MoveOperation subclass that performs the pair;
//    0 when the legacy registry governs the pair; -1 with an exception
//    (NotImplementedError naming both classes when nothing is permitted).
//  prepare: called by move_async after every validation (and the reverse-
//    route capture), before ownership is claimed or anything allocated.
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
extern MoveRouteHooks move_route_hooks;
// Exact-pair resolution as move uses it (hooks first, then the legacy
// registry, then ElementwiseMoveOperation). New reference or NULL.
PyObject* move_resolve_route(PyTypeObject* src, PyTypeObject* dst);
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
// ------------------------------------------------------------ extension.cpp
// Definition-backed Python carriers; carrier.cpp calls these from Carrier's
// tp_new / tp_init.
// Observes type and its Python bases (definition sealing). 1 when type's
// storage comes from a CarrierDefinition (own or inherited), 0 when not,
// -1 with an exception.
int extension_observe_class(PyTypeObject* type);
// __init__ of a definition-backed class: Cls(slots, *, dtype, mutable=True)
// checks the dtype with supports_dtype, installs the storage-provider
// vtable and allocates the slots. 0 / -1.
int extension_carrier_init(PyObject* self, PyObject* args, PyObject* kwargs);
// ------------------------------------------------------------- profiler.cpp
// Profiling hooks used by operations and moves. A session is the object the
// active profile(...) context owns; it is thread-local to the thread that
// entered it, but events may be recorded into it from any thread (a move's
// completion on a worker) while holding the GIL.
// Borrowed reference to this thread's active session, or NULL (no error).
PyObject* profiler_current();
// Fresh event id within session (ids are unique per session).
int64_t profiler_new_id(PyObject* session);
// This thread's innermost open operation event id in session (0 if none);
// operations push their id while running so nested events get a parent.
int64_t profiler_parent_id(PyObject* session);
void profiler_push(PyObject* session, int64_t id);
void profiler_pop(PyObject* session);
// Records one finished event. carrier_type / implementation_type are
// classes (or NULL for None); input_shapes is a tuple of Shape or NULL.
// The session applies its carriers= filter and record_shapes= flag.
// Returns -1 with an exception set only on memory failure.
int profiler_record(PyObject* session, int64_t id, int64_t parent_id, const char* name,
                    PyObject* carrier_type, PyObject* implementation_type, PyObject* input_shapes,
                    int64_t start_ns, int64_t duration_ns, uint64_t thread_id, bool succeeded);

}  // namespace swpy

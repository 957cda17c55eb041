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
#include "storage.hpp"
#include "autograd/autograd.hpp"
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
// Slot value conversion shared by the built-ins. Numeric slots reject bool
// and non-numbers (TypeError); Float32 rounds to binary32; Int32 range is
// checked (OverflowError); Bool accepts only bool. 0 / -1.
int value_to_f64(PyObject* v, const char* dtype_name, double* out);
int value_to_f32(PyObject* v, float* out);
int value_to_i32(PyObject* v, int32_t* out);
int value_to_bool(PyObject* v, bool* out);
// Canonical Python value of v for a slot of code (Any: v itself; Floating,
// Float32: float; Int32: int; Bool: bool). New reference or NULL.
PyObject* value_coerce(sw::DTypeCode code, PyObject* v);
// The zero value of a slot of code (Any and Int32: 0, floats: 0.0, Bool: False).
PyObject* value_zero(sw::DTypeCode code);

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
  PyObject* name;     // str
  Py_ssize_t size;
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
// The per-process temporary directory FileBacked uses (created lazily);
// NULL with OSError set when it cannot be created.
const char* file_backed_directory();

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

// ------------------------------------------------------------ autograd/
// Operation, grad mode, backward and the operations: autograd/autograd.hpp.

// --------------------------------------------------------------- dlpack.cpp
PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kwargs);
// Same method for a METH_FASTCALL | METH_KEYWORDS table entry: skips the
// kwargs dict CPython builds for METH_VARARGS, which dominates export cost.
PyObject* tensor_dlpack_fastcall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused);

// ---------------------------------------------------------------- await.cpp
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
  PyObject* error_tb;          // error's traceback when recorded (or NULL)
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

// Movement (csrc/python/move/): the MoveOperation family, move/move_async,
// routes and move_lowered are declared in their family header.
}  // namespace swpy
#include "move/move.hpp"
namespace swpy {

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

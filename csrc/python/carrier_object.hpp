// The carrier family: the Carrier base (carrier.cpp) with its native vtable,
// ownership and slot entry points, and the built-in carrier types (cpu.cpp,
// generic.cpp, file_backed.cpp, evictable.cpp, metal.cpp). Object layouts
// that only their own file needs stay private to it.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>

#include "carriers/kinds.hpp"
#include "dtype/dtype.hpp"
#include "carriers/ownership.hpp"
#include "files/file_storage.hpp"
#include "storage/aligned_buffer.hpp"
#include "dtype_object.hpp"
#include "slot_values.hpp"

namespace swpy {

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
// values (an iterable) as a PySequence_Fast snapshot: a list is copied to a
// tuple, since converting its items may run Python code (__index__,
// __float__) that mutates it under the borrowed items. New ref or NULL
// (TypeError not_iterable).
PyObject* carrier_values_snapshot(PyObject* values, const char* not_iterable);
// One new_like() value as a native slot of code at out: None is a hole and
// stores zero (all bits clear), anything else converts as a slot write does.
// 0 / -1.
int carrier_encode_new_value(sw::DTypeCode code, PyObject* v, unsigned char* out);
// new_like() values encoded as native slots of code into out, every one
// before any storage is touched. The slot count, or -1.
Py_ssize_t carrier_encode_values(PyObject* values, sw::DTypeCode code, std::vector<unsigned char>* out);
// A built-in carrier's dtype argument: a DType that kind stores. TypeError
// (not a DType) or ValueError (unsupported, with the kind's hint); 0 / -1.
int carrier_parse_dtype(sw::CarrierKind kind, PyObject* dtype, sw::DTypeCode* out);
// The same checks on *dtype, which becomes the DType it names (a NumPy
// dtype is resolved to its DType, borrowed). 0 / -1.
int carrier_dtype_arg(sw::CarrierKind kind, PyObject** dtype);
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
// FileBacked's layout is shared with the move family, which copies file spans
// natively (move/copy.cpp).
struct FileBackedObject {
  CarrierObject base;
  sw::FileStorage file;
  PyObject* dtype;
  PyObject* path;       // str: the file's full path (kept after release)
  Py_ssize_t size;
  bool user_directory;  // in a directory= the caller named (not the per-process one)
};
// The tier an Evictable keeps its values in now (primary while promoted,
// secondary while evicted), borrowed; NULL for a released Evictable.
PyObject* evictable_value_tier(PyObject* evictable);
// Creates a CPU carrier directly (kernels, gradients). empty skips zeroing.
PyObject* cpu_new(Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty);
// A CPU carrier (exact class) of n slots viewing foreign host memory at data
// (strideweave.from_dlpack): the storage is adopted, never copied, zeroed or
// freed; release.release(release.ctx) runs exactly once when the carrier
// gives the range up (release(), a move, garbage collection), or, while
// exports of it are outstanding, when the last of them is gone. On failure
// (NULL, exception set) release has already run.
PyObject* cpu_adopt(void* data, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, sw::ForeignRelease release);
// The same for a CPU class (a Python subclass's __init__ is not run).
PyObject* cpu_new_of_class(PyTypeObject* cls, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty);
// A Generic-class carrier holding values coerced to dtype (a DType Generic
// holds), as Generic(values) makes one; __init__ of a subclass is not run.
PyObject* generic_new_of_class(PyTypeObject* cls, PyObject* values, PyObject* dtype, bool mutable_);
// A new list of a live Generic carrier's values.
PyObject* generic_values_list(PyObject* generic);

// pickle / copy.deepcopy (pickling.cpp): __reduce__ of the Carrier base
// (a TypeError naming the class and the fix), CPU, Generic and Tensor.
PyObject* carrier_reduce(PyObject* self, PyObject* unused);
PyObject* cpu_reduce(PyObject* self, PyObject* unused);
PyObject* generic_reduce(PyObject* self, PyObject* unused);
// The fix offered to a caller whose tensor is on a carrier that cannot do
// what was asked: move it to CPU (dtypes CPU holds) or to Generic.
const char* move_fix_hint(sw::DTypeCode dtype);
// Native truth of a CPU carrier (exact or subclass), whatever its Python
// hooks say: slot dtype, slot count and address (NULL once released). For
// DLPack export (API.md section 12).
struct CpuStorage {
  void* data;
  Py_ssize_t size;
  sw::DTypeCode dtype;
};
CpuStorage cpu_storage_of(PyObject* cpu);
// One export reference on the CPU carrier's current storage range
// (AlignedBuffer::acquire_export_ref); NULL when it holds none or on OOM.
sw::StorageControl* cpu_acquire_export_ref(PyObject* cpu);

}  // namespace swpy

// DLPack export: Tensor.__dlpack__ / __dlpack_device__, the capsules and the
// managed-tensor owner (a strong reference to the exporting Tensor).
//
// Check order (API.md section 7): multi-subtensor, the carrier's dlpack_info()
// hook and its conversion, copy, dl_device, dtype, max_version, null pointer.
// The engine (dlpack/export.cpp) builds the managed tensor in one malloc'd
// block; this file only decides what goes in it and owns the Python side of
// its lifetime. A CPU carrier's export also holds an export reference on its
// storage range (pin_cpu_storage), so release() or a move while a consumer
// still views it leaves zeros there, not freed memory (API.md section 12).
#include <cstring>

#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tiled_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"

#include "dlpack/export.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "util/fastcall.hpp"
#include "util/gil_gate.hpp"
#include "dlpack_exchange.hpp"

namespace swpy {

namespace {

namespace dl = sw::dlpack;

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";


// ------------------------------------------------------------ owner release

// True while Python objects may still be touched from a foreign thread. Once
// finalization has begun, PyGILState_Ensure may hang or kill the calling
// thread, so the reference is deliberately leaked instead.
bool interpreter_alive() { return compat::interpreter_alive(); }

// A decref that leaves a pending exception exactly as it was. GIL held.
// Only a decref that deallocates can run code that disturbs it: the common
// case (the Tensor outlives its export) skips the thread-state lookup.
void decref_preserving_error(PyObject* o) {
  if (Py_REFCNT(o) > 1 || !PyErr_Occurred()) {
    Py_DECREF(o);  // raw: the reference the managed tensor owned (no Ref holds it)
    return;
  }
  ErrorGuard keep;
  Py_DECREF(o);  // raw: as above, under the guard
}

// Drops the managed tensor's Tensor reference. Runs from the engine deleter,
// possibly on a thread without the GIL (ctypes, another runtime's worker), so
// it takes the GIL itself and preserves whatever exception is pending on this
// thread (a capsule often dies while an exception unwinds a frame). A thread
// that holds the GIL drops it even while the interpreter finalizes (a NumPy
// view freed with its module's globals): the Tensor then dies too, and with
// it any producer memory from_dlpack adopted; only a thread without the GIL
// leaks the reference once finalization began.
void release_tensor_ref(void* owner) noexcept {
  if (!owner) return;
  if (compat::thread_holds_gil()) {
    decref_preserving_error(static_cast<PyObject*>(owner));
    return;
  }
  // Past the exit gate the reference is left to the dying runtime.
  PyGILState_STATE gil;
  if (!interpreter_alive() || !gil_gate::ensure(&gil)) return;
  decref_preserving_error(static_cast<PyObject*>(owner));
  PyGILState_Release(gil);
}

// The capsule destructor always runs with the GIL held (finalization
// included), so an unconsumed capsule drops the reference directly, without
// the PyGILState round trip.
void release_tensor_ref_holding_gil(void* owner) noexcept {
  if (owner) decref_preserving_error(static_cast<PyObject*>(owner));
}

template <class M>
void delete_holding_gil(M* m) {
  auto* ctx = static_cast<dl::ExportContext*>(m->manager_ctx);
  if (ctx->release_owner == release_tensor_ref) ctx->release_owner = release_tensor_ref_holding_gil;
  m->deleter(m);
}

// --------------------------------------------------------- capsule destructors

// A consumer that takes ownership renames the capsule to used_dltensor[...]
// and calls the deleter itself; then there is nothing left for us to do. The
// managed tensor is also stored as the capsule's context, so the common case
// (our own name pointer, unconsumed) costs no string compare.
bool still_ours(PyObject* capsule, const char* ours) {
  const char* name = PyCapsule_GetName(capsule);  // our capsule: never fails
  return name == ours || (name && std::strcmp(name, ours) == 0);
}

void legacy_capsule_destructor(PyObject* capsule) {
  if (!still_ours(capsule, kLegacyName)) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetContext(capsule));
  if (m && m->deleter) delete_holding_gil(m);
}

void versioned_capsule_destructor(PyObject* capsule) {
  if (!still_ours(capsule, kVersionedName)) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetContext(capsule));
  if (m && m->deleter) delete_holding_gil(m);
}

// Wraps a managed tensor in a capsule, or runs its deleter and returns NULL.
template <class M>
PyObject* wrap(M* m, const char* name, PyCapsule_Destructor destructor) {
  Ref capsule = Ref::steal(PyCapsule_New(m, name, destructor));
  if (capsule && PyCapsule_SetContext(capsule.get(), m) == 0) return capsule.release();
  // Not yet visible to anyone: detach the destructor, then free below.
  if (capsule) PyCapsule_SetDestructor(capsule.get(), nullptr);
  capsule.reset();
  m->deleter(m);
  return nullptr;
}

// ------------------------------------------------------ argument conversions

struct Device {
  int32_t type;
  int32_t id;
};

// Converts an int-like to int32; -1 with an exception set on failure.
int to_int32(PyObject* o, const char* what, int32_t* out) {
  if (PyBool_Check(o)) {
    PyErr_Format(PyExc_TypeError, "dlpack_info()['%s'] must be an int, not bool", what);
    return -1;
  }
  long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (!dl::fits_int32(v)) {
    PyErr_Format(PyExc_OverflowError, "dlpack_info()['%s'] does not fit a 32-bit DLPack field", what);
    return -1;
  }
  *out = static_cast<int32_t>(v);
  return 0;
}

// Replaces the pending exception with a TypeError about info's type, chained
// from it (raise TypeError(...) from exc).
void raise_type_error_from_current(PyObject* info) {
  PyObject* cause = compat::take_raised();
  PyErr_Format(PyExc_TypeError,
               "dlpack_info() must return a mapping convertible to dict with keys pointer, device_type "
               "and device_id, not %.100s",
               Py_TYPE(info)->tp_name);
  if (!cause) return;
  PyObject* exc = compat::take_raised();
  PyException_SetCause(exc, cause);  // steals cause
  compat::restore_raised(exc);
}

// Resolves the carrier's DLPack opt-in: calls the dlpack_info() hook (its
// exceptions propagate unchanged), converts its result with dict() (not
// convertible -> TypeError), reads the three keys (missing -> KeyError; extra
// keys ignored). The exact built-in CPU type takes a shortcut with the same
// result as its native hook ({"pointer": pointer(), "device_type": 1,
// "device_id": 0}), which keeps export as cheap as NumPy's.
int resolve_carrier(PyObject* carrier, uintptr_t* pointer, Device* device) {
  if (Py_TYPE(carrier) == &CPU_Type) {
    // carrier_host_data() without its hook checks: an exact CPU has none.
    *pointer = reinterpret_cast<uintptr_t>(cpu_storage_of(carrier).data);  // NULL once released
    *device = Device{kDLCPU, 0};
    return 0;
  }
  Ref info = Ref::steal(carrier_dlpack_info(carrier));
  if (!info) return -1;
  Ref d;
  if (PyDict_CheckExact(info.get())) {
    d = std::move(info);
  } else {
    d = Ref::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyDict_Type), info.get()));
    if (!d) {
      // dict() reports a non-mapping with TypeError or ValueError (a sequence
      // of wrong-length items); both mean "not convertible" here.
      if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError))
        raise_type_error_from_current(info.get());
      return -1;
    }
  }
  PyObject* keys[3] = {names().pointer, names().device_type, names().device_id};
  // Strong references: converting a value may run Python code (__index__)
  // that mutates the hook's dict and frees the others.
  Ref values[3];
  for (int k = 0; k < 3; ++k) {
    values[k] = Ref::borrow(PyDict_GetItemWithError(d.get(), keys[k]));
    if (!values[k]) {
      if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, keys[k]);
      return -1;
    }
  }
  if (PyBool_Check(values[0].get())) {
    PyErr_SetString(PyExc_TypeError, "dlpack_info()['pointer'] must be an int, not bool");
    return -1;
  }
  const unsigned long long p = PyLong_AsUnsignedLongLong(values[0].get());
  if (p == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return -1;
  if (!dl::fits_pointer(p)) {
    PyErr_SetString(PyExc_OverflowError, "dlpack_info()['pointer'] does not fit a pointer");
    return -1;
  }
  *pointer = static_cast<uintptr_t>(p);
  if (to_int32(values[1].get(), "device_type", &device->type) < 0) return -1;
  return to_int32(values[2].get(), "device_id", &device->id);
}

// A two-element tuple or list of ints (what = argument name for messages).
// TypeError for another container, ValueError for a wrong count or a
// non-integer element. An element with __index__ (a NumPy integer, an
// IntEnum) is an integer too. Values are returned as long long with an
// overflow indicator (+1 above, -1 below the range), so a huge ceiling still
// parses.
int parse_pair(PyObject* o, const char* what, dl::IntPair* out) {
  if (!PyTuple_Check(o) && !PyList_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s must be a tuple or list, not %.100s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  // A tuple snapshot: an element's __index__ may resize a list.
  Ref pair = Ref::steal(PySequence_Tuple(o));
  if (!pair) return -1;
  if (PyTuple_GET_SIZE(pair.get()) != 2) {
    PyErr_Format(PyExc_ValueError, "%s must have exactly two elements, got %zd", what,
                 PyTuple_GET_SIZE(pair.get()));
    return -1;
  }
  for (Py_ssize_t k = 0; k < 2; ++k) {
    PyObject* item = PyTuple_GET_ITEM(pair.get(), k);
    // bool is an int subclass but not a version or device number.
    if (PyBool_Check(item) || (!PyLong_Check(item) && !PyIndex_Check(item))) {
      PyErr_Format(PyExc_ValueError, "%s must hold two integers, got %.100s", what, Py_TYPE(item)->tp_name);
      return -1;
    }
    Ref number = PyLong_Check(item) ? Ref::borrow(item) : Ref::steal(PyNumber_Index(item));
    if (!number) return -1;
    out->value[k] = PyLong_AsLongLongAndOverflow(number.get(), &out->overflow[k]);
    if (out->value[k] == -1 && PyErr_Occurred()) return -1;
  }
  return 0;
}

// parse_pair through a one-entry cache (*cached, *cached_value): an exact
// tuple of exact ints parses the same every time, and np.from_dlpack passes
// the same max_version tuple on every call.
int parse_pair_cached(PyObject* o, const char* what, PyObject** cached, dl::IntPair* cached_value,
                      dl::IntPair* out) {
  if (o == *cached) {
    *out = *cached_value;
    return 0;
  }
  if (parse_pair(o, what, out) < 0) return -1;
  if (PyTuple_CheckExact(o) && PyLong_CheckExact(PyTuple_GET_ITEM(o, 0)) &&
      PyLong_CheckExact(PyTuple_GET_ITEM(o, 1))) {
    Py_XSETREF(*cached, Py_NewRef(o));
    *cached_value = *out;
  }
  return 0;
}

PyObject* device_tuple(const Device& d) {
  if (d.type == kDLCPU && d.id == 0) {
    // Immutable, so one (1, 0) serves every CPU export.
    PyObject*& cpu = module_state.dlpack.cpu_device;
    if (!cpu && !(cpu = Py_BuildValue("(ii)", d.type, d.id))) return nullptr;
    return Py_NewRef(cpu);
  }
  return Py_BuildValue("(ii)", d.type, d.id);
}

bool is_none(PyObject* o) { return !o || o == Py_None; }

// The four __dlpack__ inputs, borrowed; NULL when not given.
struct ExportArgs {
  PyObject* stream = nullptr;
  PyObject* max_version = nullptr;
  PyObject* dl_device = nullptr;
  PyObject* copy = nullptr;
  bool v1 = false;  // max_version=(1, 0) already parsed (the C exchange API)
};

constexpr Signature kDlpackSignature{"__dlpack__", {"stream", "max_version", "dl_device", "copy"}, 1};

PyObject* export_capsule(PyObject* self, const ExportArgs& args);

}  // namespace

// ------------------------------------------------------------------- methods

// (stream=None, *, max_version=None, dl_device=None, copy=None). FASTCALL:
// METH_VARARGS would build a kwargs dict on every export.
PyObject* tensor_dlpack_fastcall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* a[4];
  if (parse_args(kDlpackSignature, module_state.keywords.dlpack, args, static_cast<size_t>(nargsf), kwnames, a) < 0)
    return nullptr;
  ExportArgs e;
  e.stream = a[0];
  e.max_version = a[1];
  e.dl_device = a[2];
  e.copy = a[3];
  return export_capsule(self, e);
}

namespace {

// The BufferError of an export without storage: "data pointer must be
// non-null" (callers match on it), and why when the carrier is released
// (a move or release()), in the words np.asarray uses.
void raise_no_storage(PyObject* carrier) {
  if (as_carrier(carrier)->released)
    PyErr_Format(PyExc_BufferError,
                 "DLPack data pointer must be non-null: the %s carrier is released (moved or released)",
                 type_name(carrier));
  else
    PyErr_SetString(PyExc_BufferError, "DLPack data pointer must be non-null (was the carrier released?)");
}

// BufferError when a tensor with elements has no storage to export: a null
// pointer, or a carrier released during this call (pointer is then stale).
bool pointer_gone(uintptr_t pointer, bool released_before, PyObject* carrier, const sw::Layout& layout) {
  if (!dl::storage_gone(layout.size(), pointer, released_before, as_carrier(carrier)->released)) return false;
  raise_no_storage(carrier);
  return true;
}

// A native refusal (BufferError from the base hook or a built-in carrier's)
// re-raised with the carrier's class and the way out: a move to CPU, whose
// storage exports (API.md section 11). An exception a Python dlpack_info()
// override raises propagates unchanged (spec), so it is left as it is.
PyObject* explain_refusal(PyObject* self) {
  if (!PyErr_ExceptionMatches(PyExc_BufferError)) return nullptr;
  PyObject* carrier = as_tensor(self)->carrier;
  if (carrier_overrides(carrier, "dlpack_info")) return nullptr;
  // A TiledEvictable's own refusal names its way out (project()); a move of
  // it is refused, so the CPU hint would mislead.
  if (PyObject_TypeCheck(carrier, &TiledEvictable_Type)) return nullptr;
  const long long span = static_cast<long long>(layout_of(as_tensor(self)->layout).cosize());
  // Taken first: a Python dtype() hook must not run with an exception set.
  Ref exc = Ref::steal(compat::take_raised());
  Ref dtype = Ref::steal(carrier_dtype(carrier));
  if (!dtype) {  // a broken dtype hook: keep the carrier's own refusal
    PyErr_Clear();
    compat::restore_raised(exc.release());
    return nullptr;
  }
  const sw::DTypeCode code = is_dtype(dtype.get()) ? dtype_code(dtype.get()) : sw::DTypeCode::Any;
  if (const char* arg = dl::cpu_move_dtype_arg(code)) {
    PyErr_Format(PyExc_BufferError,
                 "%S (carrier class %s); to export, move it to a CPU carrier with "
                 "strideweave.move(t, strideweave.CPU(%lld%s)) first",
                 exc.get(), type_name(carrier), span, arg);
  } else {
    PyErr_Format(PyExc_BufferError,
                 "%S (carrier class %s, dtype %R); only CPU carriers export, and they hold only Float32, Int32 "
                 "and Bool, so copy the values out instead: strideweave.tensor(t) (a CPU copy), "
                 "np.asarray(t) or t.tolist()",
                 exc.get(), type_name(carrier), dtype.get());
  }
  return nullptr;
}

// A CPU carrier (built-in or subclass) exports its native storage, typed and
// sized by the native buffer, never by Python hooks (API.md section 12): a
// dtype() override, a size() override or a dlpack_info() pointer that
// disagrees with the storage is refused with BufferError rather than
// "corrected", so no export can address past the buffer or with another item
// size. On success *storage is an export reference that keeps the range
// mapped (reading zeros once the carrier releases it) until the managed
// tensor's deleter drops it; null for a tensor without elements. Runs after
// every Python callback of the export, so the state it checks is final.
int pin_cpu_storage(TensorObject* t, sw::DTypeCode code, uintptr_t pointer, const sw::Layout& layout,
                    sw::StorageControl** storage) {
  const CpuStorage c = cpu_storage_of(t->carrier);
  switch (dl::check_cpu_export(code, dl::CpuStorageView{c.dtype, c.data, static_cast<int64_t>(c.size)}, pointer,
                               static_cast<int64_t>(t->offset), layout)) {
    case dl::CpuExport::Pin:
      break;
    case dl::CpuExport::NothingToPin:
      return 0;
    case dl::CpuExport::DtypeMismatch:
      PyErr_Format(PyExc_BufferError,
                   "DLPack export of a CPU carrier uses its native storage: the tensor's dtype %R does not match "
                   "the storage dtype %R (is dtype() overridden?)",
                   t->dtype, dtype_singleton(c.dtype));
      return -1;
    case dl::CpuExport::NoData:
      raise_no_storage(t->carrier);
      return -1;
    case dl::CpuExport::PointerMismatch:
      PyErr_SetString(PyExc_BufferError,
                      "DLPack export of a CPU carrier uses its native storage: dlpack_info()['pointer'] does not "
                      "match the carrier's storage");
      return -1;
    case dl::CpuExport::SpanExceeds:
      PyErr_Format(PyExc_BufferError,
                   "DLPack export of a CPU carrier uses its native storage: offset %zd + layout cosize %lld "
                   "exceeds its %zd slots (is size() overridden?)",
                   t->offset, static_cast<long long>(layout.cosize()), c.size);
      return -1;
  }
  *storage = cpu_acquire_export_ref(t->carrier);
  if (!*storage) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

// Every check of an export, in API.md's order, and what the managed tensor
// will describe; *versioned says which form. 0 / -1 with the exception.
int describe_export(PyObject* self, const ExportArgs& args, dl::ExportSpec* out, bool* out_versioned) {
  PyObject* max_version = args.max_version;
  PyObject* dl_device = args.dl_device;
  PyObject* copy = args.copy;
  // args.stream is ignored: export does no work a stream could order.

  if (tensor_is_multi(self) && tensor_reject_multi(self, "DLPack export") < 0) return -1;
  TensorObject* t = as_tensor(self);

  uintptr_t pointer = 0;
  Device device{};
  // copy's __bool__, the hooks and an _is_mutable override run Python code
  // that may release the carrier after its pointer was read.
  const bool released_before = as_carrier(t->carrier)->released;
  if (resolve_carrier(t->carrier, &pointer, &device) < 0) {
    explain_refusal(self);
    return -1;
  }

  if (!is_none(copy)) {
    int truthy = PyObject_IsTrue(copy);
    if (truthy < 0) return -1;
    if (truthy) {
      PyErr_SetString(PyExc_BufferError,
                      "copy exports are not supported: StrideWeave exports alias the carrier's storage");
      return -1;
    }
  }

  if (!is_none(dl_device)) {
    dl::IntPair want;
    DlpackArgCache& cache = module_state.dlpack;
    if (parse_pair_cached(dl_device, "dl_device", &cache.dl_device, &cache.dl_device_value, &want) < 0) return -1;
    // Any int32 is a valid value of DLDeviceType (an enum with int32_t underneath).
    if (!dl::device_matches(want, DLDevice{static_cast<DLDeviceType>(device.type), device.id})) {
      PyErr_Format(PyExc_BufferError,
                   "cross-device exports are not supported: the carrier's storage is on device (%d, %d)",
                   device.type, device.id);
      return -1;
    }
  }

  const sw::DTypeCode code = dtype_code(t->dtype);
  // Written straight into the spec: copying a DLDataType built byte by byte
  // stalls on store forwarding, measurable at this call's cost.
  dl::ExportSpec& spec = *out;
  if (!dl::dl_dtype_for(code, &spec.dtype)) {
    PyErr_Format(PyExc_BufferError, "DLPack export supports only Float32 and Int32 dtypes, not %R", t->dtype);
    return -1;
  }

  bool versioned = args.v1;
  if (!versioned && !is_none(max_version)) {
    dl::IntPair v;
    DlpackArgCache& cache = module_state.dlpack;
    if (parse_pair_cached(max_version, "max_version", &cache.max_version, &cache.max_version_value, &v) < 0)
      return -1;
    const dl::VersionChoice choice = dl::choose_version(v);
    if (choice == dl::VersionChoice::Negative) {
      PyErr_SetString(PyExc_ValueError, "max_version components must be non-negative");
      return -1;
    }
    versioned = choice == dl::VersionChoice::Versioned;
  }

  const sw::Layout& layout = layout_of(t->layout);
  if (pointer_gone(pointer, released_before, t->carrier, layout)) return -1;

  spec.data = reinterpret_cast<void*>(pointer);
  // Any int32 is a valid value of DLDeviceType (an enum with int32_t underneath).
  spec.device = DLDevice{static_cast<DLDeviceType>(device.type), device.id};
  spec.byte_offset = dl::byte_offset(static_cast<int64_t>(t->offset), code);
  spec.leaves = layout.leaves();
  if (versioned) {
    // Same predicate as Tensor.is_mutable() for a single-subtensor tensor.
    int mut = carrier_is_mutable(t->carrier);
    if (mut < 0) return -1;
    spec.read_only = !mut;
    if (pointer_gone(pointer, released_before, t->carrier, layout)) return -1;
  }

  if (PyObject_TypeCheck(t->carrier, &CPU_Type) && pin_cpu_storage(t, code, pointer, layout, &spec.storage) < 0)
    return -1;
  *out_versioned = versioned;
  return 0;
}

PyObject* export_capsule(PyObject* self, const ExportArgs& args) {
  dl::ExportSpec spec;
  bool versioned = false;
  if (describe_export(self, args, &spec, &versioned) < 0) return nullptr;
  // The managed tensor owns this reference and spec.storage; its deleter
  // drops both.
  Ref owner = Ref::borrow(self);
  if (versioned) {
    if (DLManagedTensorVersioned* m = dl::make_versioned(spec, owner.get(), release_tensor_ref)) {
      (void)owner.release();  // now the managed tensor's
      return wrap(m, kVersionedName, versioned_capsule_destructor);
    }
  } else if (DLManagedTensor* m = dl::make_legacy(spec, owner.get(), release_tensor_ref)) {
    (void)owner.release();  // now the managed tensor's
    return wrap(m, kLegacyName, legacy_capsule_destructor);
  }
  sw::drop_export_ref(spec.storage);
  return PyErr_NoMemory();
}

}  // namespace

DLManagedTensorVersioned* dlpack_export_v1(PyObject* tensor) {
  ExportArgs args;
  args.v1 = true;
  dl::ExportSpec spec;
  bool versioned = false;
  if (describe_export(tensor, args, &spec, &versioned) < 0) return nullptr;
  Ref owner = Ref::borrow(tensor);
  DLManagedTensorVersioned* m = dl::make_versioned(spec, owner.get(), release_tensor_ref);
  if (!m) {
    sw::drop_export_ref(spec.storage);
    PyErr_NoMemory();
    return nullptr;
  }
  (void)owner.release();  // now the managed tensor's
  return m;
}

int dlpack_describe_v1(PyObject* tensor, sw::dlpack::ExportSpec* spec) {
  ExportArgs args;
  args.v1 = true;
  bool versioned = false;
  if (describe_export(tensor, args, spec, &versioned) < 0) return -1;
  // A borrowed DLTensor has no deleter to drop an export reference: the
  // checks above still ran, and the consumer borrows only while the Tensor
  // is alive and unreleased (the header's no_sync contract).
  sw::drop_export_ref(spec->storage);
  spec->storage = nullptr;
  return 0;
}

int dlpack_parse_pair(PyObject* o, const char* what, sw::dlpack::IntPair* out) { return parse_pair(o, what, out); }

PyObject* dlpack_cpu_device() {
  // Borrowed: the module state keeps the tuple.
  return Ref::steal(device_tuple(Device{kDLCPU, 0})).get();
}

PyObject* tensor_dlpack_device(PyObject* self, PyObject*) {
  if (tensor_is_multi(self) && tensor_reject_multi(self, "DLPack export") < 0) return nullptr;
  uintptr_t pointer = 0;
  Device device{};
  // Refused exactly as __dlpack__ refuses (spec: both fail identically).
  if (resolve_carrier(as_tensor(self)->carrier, &pointer, &device) < 0) return explain_refusal(self);
  return device_tuple(device);
}

int dlpack_module_init(PyObject*) {
  // No public names: the export is Tensor's methods; the import,
  // strideweave.from_dlpack, is dlpack_import.cpp.
  return 0;
}

}  // namespace swpy

// Carrier: the C base of every storage carrier. It owns the state checks
// (released, mutability, range), the version counter and the ownership
// tokens; storage itself lives in the native subclasses (through
// CarrierObject::vt) or in Python hooks of Python subclasses.
//
// Hook dispatch: when a Python class in type(self)'s MRO, before the first
// native class, defines a hook (size, dtype, get_value, set_value,
// _is_mutable, _release, new_like, allocate_like, dlpack_info), every
// internal carrier_* function calls it; otherwise the native vtable is used.
// The base's own Python methods (size(), dtype(), ...) always take the native
// path, so an override may call super().<hook>() without recursing.
#include <cmath>
#include <cstring>

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "extension/extension_api.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/args.hpp"
#include "util/fastcall.hpp"
#include "util/type_object.hpp"
#include "module_state.hpp"

namespace swpy {

namespace {



bool overrides(PyObject* self, PyObject* name) {
  PyTypeObject* t = Py_TYPE(self);
  // Fast path: an instance of a native class has no Python override.
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  PyObject* mro = t->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(mro); ++k) {
    auto* cls = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, k));
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
    if (cls->tp_dict && PyDict_GetItem(cls->tp_dict, name)) return true;
  }
  return false;
}

template <typename T>
T not_implemented(PyObject* c, const char* hook, T ret) {
  PyErr_Format(PyExc_NotImplementedError, "%s does not implement the carrier hook %s()", type_name(c), hook);
  return ret;
}

// The slot hooks (get_value, set_value) running on this thread. While a
// carrier's override runs, a slot access to that same carrier from inside
// it (super().__getitem__(i), self[i] = v) takes the native path instead of
// calling the override again, as super().get_value(i) does: no endless
// recursion, and a Python-only carrier gets NotImplementedError.
struct HookFrame {
  PyObject* carrier;
  PyObject* hook;
  HookFrame* prev;
};
thread_local HookFrame* running_hooks = nullptr;

bool hook_running(PyObject* c, PyObject* hook) {
  for (const HookFrame* f = running_hooks; f; f = f->prev)
    if (f->carrier == c && f->hook == hook) return true;
  return false;
}

class HookScope {
 public:
  HookScope(PyObject* c, PyObject* hook) : frame_{c, hook, running_hooks} { running_hooks = &frame_; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  ~HookScope() { running_hooks = frame_.prev; }

 private:
  HookFrame frame_;
};

// Whether the carrier_* functions call c's Python override of a slot hook.
bool calls_slot_hook(PyObject* c, PyObject* hook) { return overrides(c, hook) && !hook_running(c, hook); }

int check_live(PyObject* c) {
  if (as_carrier(c)->released) {
    PyErr_Format(PyExc_RuntimeError, "%s carrier is released", type_name(c));
    return -1;
  }
  return 0;
}

int check_range(PyObject* c, Py_ssize_t i) {
  Py_ssize_t n = carrier_size(c);
  if (n < 0) return -1;
  if (!sw::slot_in_range(i, n)) {
    PyErr_Format(PyExc_IndexError, "carrier index %zd out of range for size %zd", i, n);
    return -1;
  }
  return 0;
}

// The vtable reads the native storage itself. When a Python size() override
// did the range check it may claim more slots than the storage has, or have
// released it: check again against the storage. -1 with an exception.
int check_native_range(PyObject* c, Py_ssize_t i) {
  if (!overrides(c, names().size)) return 0;  // check_range used the native size
  if (check_live(c) < 0) return -1;
  Py_ssize_t n = as_carrier(c)->vt->size(as_carrier(c));
  if (n < 0) return -1;
  if (i >= n) {
    PyErr_Format(PyExc_IndexError, "carrier index %zd out of range for size %zd", i, n);
    return -1;
  }
  return 0;
}

// Native paths (vtable or NotImplementedError), used by the base's Python
// methods and by the carrier_* functions when no override exists.
Py_ssize_t native_size(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (!o->vt) return not_implemented<Py_ssize_t>(c, "size", -1);
  return o->released ? 0 : o->vt->size(o);
}

PyObject* native_dtype(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (!o->vt) return not_implemented<PyObject*>(c, "dtype", nullptr);
  PyObject* d = dtype_singleton(o->vt->dtype_code(o));
  if (!d) {
    PyErr_SetString(PyExc_SystemError, "carrier reports an unknown dtype");
    return nullptr;
  }
  return Py_NewRef(d);
}

int native_is_mutable(PyObject* c) { return as_carrier(c)->constructed_mutable ? 1 : 0; }

void native_release(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (o->vt && o->vt->release) o->vt->release(o);
}

PyObject* native_new_like(PyObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  CarrierObject* o = as_carrier(c);
  if (!o->vt || !o->vt->new_like) return not_implemented<PyObject*>(c, "new_like", nullptr);
  return o->vt->new_like(o, values, mutable_, dtype);
}

PyObject* native_allocate_like(PyObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  CarrierObject* o = as_carrier(c);
  if (!o->vt || !o->vt->allocate_like) return not_implemented<PyObject*>(c, "allocate_like", nullptr);
  return o->vt->allocate_like(o, n, mutable_, dtype, empty);
}

PyObject* native_dlpack_info(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (o->vt && o->vt->dlpack_info) {
    PyObject* r = o->vt->dlpack_info(o);
    if (r || PyErr_Occurred()) return r;
  }
  PyErr_SetString(PyExc_BufferError, "DLPack is not supported for this carrier");
  return nullptr;
}

// The native storage's slot i (get) or a write into it (set), checked
// against the storage itself: live and in range of its own size, whatever
// a size() override says.
int check_native_slot(PyObject* c, Py_ssize_t i, const char* hook) {
  CarrierObject* o = as_carrier(c);
  if (!o->vt) return not_implemented<int>(c, hook, -1);
  if (check_live(c) < 0) return -1;
  const Py_ssize_t n = o->vt->size(o);
  if (n < 0) return -1;
  if (!sw::slot_in_range(i, n)) {
    PyErr_Format(PyExc_IndexError, "carrier index %zd out of range for size %zd", i, n);
    return -1;
  }
  return 0;
}

PyObject* native_get(PyObject* c, Py_ssize_t i) {
  if (check_native_slot(c, i, "get_value") < 0) return nullptr;
  return as_carrier(c)->vt->get(as_carrier(c), i);
}

int native_set(PyObject* c, Py_ssize_t i, PyObject* v) {
  if (check_native_slot(c, i, "set_value") < 0) return -1;
  return as_carrier(c)->vt->set(as_carrier(c), i, v);
}

// dtype argument of new_like/allocate_like: None or a DType; NULL for None.
int parse_dtype_arg(PyObject* dtype, PyObject** out) {
  if (!dtype || dtype == Py_None) { *out = nullptr; return 0; }
  const int r = dtype_resolve(dtype, out);
  if (r < 0) return -1;
  if (r == 0) {
    PyErr_Format(PyExc_TypeError, "dtype must be a DType (or a NumPy dtype) or None, not %.100s", type_name(dtype));
    return -1;
  }
  return 0;
}

// Checks a new_like/allocate_like hook's result before anyone writes into
// it (op results, gradients, move-backward staging, .grad accumulation,
// Evictable.promote): the exact class asked for, at least n slots, and the
// requested dtype (dtype, or c's own when NULL), as its hooks report them
// and, for a CPU carrier, as its native storage holds them (the writers use
// the native buffer). Steals r.
PyObject* check_like_result(PyObject* c, PyObject* r, const char* hook, Py_ssize_t n, PyObject* dtype) {
  Ref res = Ref::steal(r);
  if (!res) return nullptr;
  if (Py_TYPE(r) != Py_TYPE(c)) {
    PyErr_Format(PyExc_TypeError, "%s.%s() must return a %s, not %.100s", type_name(c), hook, type_name(c),
                 type_name(r));
    return nullptr;
  }
  Ref want = dtype ? Ref::borrow(dtype) : Ref::steal(carrier_dtype(c));
  if (!want) return nullptr;
  Ref got = Ref::steal(carrier_dtype(r));
  if (!got) return nullptr;
  if (dtype_code(got.get()) != dtype_code(want.get())) {
    PyErr_Format(PyExc_TypeError, "%s.%s() returned a carrier of dtype %R, expected %R", type_name(c), hook,
                 got.get(), want.get());
    return nullptr;
  }
  const Py_ssize_t size = carrier_size(r);
  if (size < 0) return nullptr;
  if (size < n) {
    PyErr_Format(PyExc_RuntimeError, "%s.%s() returned a carrier of %zd slots, expected at least %zd",
                 type_name(c), hook, size, n);
    return nullptr;
  }
  if (PyObject_TypeCheck(r, &CPU_Type)) {
    const CpuStorage st = cpu_storage_of(r);
    if (st.dtype != dtype_code(want.get()) || st.size < n) {
      PyErr_Format(PyExc_TypeError,
                   "%s.%s() returned a carrier whose native storage (%zd slots of dtype %R) does not match its "
                   "hooks or the request (%zd slots of dtype %R)",
                   type_name(c), hook, st.size, dtype_singleton(st.dtype), n, want.get());
      return nullptr;
    }
  }
  return res.release();
}

int parse_token(PyObject* arg, int64_t* out) {
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "ownership token must be an int, not %.100s", type_name(arg));
    return -1;
  }
  long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    v = 0;  // cannot match any token
  }
  *out = v;
  return 0;
}

int index_from_key(PyObject* key, Py_ssize_t* out) {
  // bool is refused as a Tensor index and as any size or offset is.
  if (!PyIndex_Check(key) || is_bool(key)) {
    PyErr_Format(PyExc_TypeError, "carrier indices must be integers, not %.100s", type_name(key));
    return -1;
  }
  Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
  if (i == -1 && PyErr_Occurred()) return -1;
  *out = i;
  return 0;
}

// ------------------------------------------------------------ Python type

PyObject* Carrier_new(PyTypeObject* type, PyObject*, PyObject*) {
  // Arguments belong to the subclass's __init__. Building an instance
  // observes its class (a CarrierDefinition can no longer be registered).
  if (type != &Carrier_Type && extension_observe_class(type) < 0) return nullptr;
  return carrier_alloc(type, nullptr);
}

int Carrier_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  // A definition-backed class is built as Cls(slots, *, dtype, mutable=True).
  if (Py_TYPE(self) != &Carrier_Type) {
    int defined = extension_observe_class(Py_TYPE(self));
    if (defined < 0) return -1;
    if (defined) return extension_carrier_init(self, args, kwargs);
  }
  if ((args && PyTuple_GET_SIZE(args) != 0) || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "Carrier.__init__() takes no arguments");
    return -1;
  }
  return 0;
}

void Carrier_tp_dealloc(PyObject* self) { carrier_dealloc(self); }

PyObject* Carrier_repr(PyObject* self) {
  CarrierObject* o = as_carrier(self);
  if (!o->vt) return PyBaseObject_Type.tp_repr(self);
  if (o->released) return PyUnicode_FromFormat("<%s released>", type_name(self));
  // A definition-backed carrier's size comes from a provider that may raise.
  Py_ssize_t n = o->vt->size(o);
  if (n < 0) return nullptr;
  Ref d = Ref::steal(native_dtype(self));
  if (!d) return nullptr;
  return PyUnicode_FromFormat("<%s size=%zd dtype=%R version=%llu%s>", type_name(self), n, d.get(),
                              static_cast<unsigned long long>(o->version),
                              o->constructed_mutable ? "" : " immutable");
}

PyObject* Carrier_subscript(PyObject* self, PyObject* key) {
  Py_ssize_t i;
  if (index_from_key(key, &i) < 0) return nullptr;
  return carrier_get(self, i);
}

int Carrier_ass_subscript(PyObject* self, PyObject* key, PyObject* value) {
  if (!value) {
    PyErr_SetString(PyExc_TypeError, "carrier slots cannot be deleted");
    return -1;
  }
  Py_ssize_t i;
  if (index_from_key(key, &i) < 0) return -1;
  return carrier_set(self, i, value);
}

PyObject* Carrier_size(PyObject* self, PyObject*) {
  Py_ssize_t n = native_size(self);
  return n < 0 ? nullptr : PyLong_FromSsize_t(n);
}

PyObject* Carrier_dtype(PyObject* self, PyObject*) { return native_dtype(self); }

// The slot hooks' native versions (what super().get_value(i) reaches): no
// mutability check and no version change, which belong to c[i] = v.
PyObject* Carrier_get_value(PyObject* self, PyObject* key) {
  Py_ssize_t i;
  if (index_from_key(key, &i) < 0) return nullptr;
  return native_get(self, i);
}

constexpr Signature kSetValue{"set_value", {"i", "v"}, 2, 2, 2};

PyObject* Carrier_set_value(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* a[2];
  if (parse_positional(kSetValue, args, nargs, a) < 0) return nullptr;
  Py_ssize_t i;
  if (index_from_key(a[0], &i) < 0 || native_set(self, i, a[1]) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Carrier_is_mutable(PyObject* self, PyObject*) {
  int r = carrier_is_mutable(self);
  return r < 0 ? nullptr : PyBool_FromLong(r);
}

PyObject* Carrier_priv_is_mutable(PyObject* self, PyObject*) { return PyBool_FromLong(native_is_mutable(self)); }

PyObject* Carrier_is_owned(PyObject* self, PyObject*) { return PyBool_FromLong(carrier_is_owned(self)); }

PyObject* Carrier_release(PyObject* self, PyObject*) {
  if (carrier_release(self) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Carrier_priv_release(PyObject* self, PyObject*) {
  native_release(self);
  if (PyErr_Occurred()) return nullptr;  // a StorageProvider.release() raised
  Py_RETURN_NONE;
}

PyObject* Carrier_is_released(PyObject* self, PyObject*) { return PyBool_FromLong(carrier_is_released(self)); }

PyObject* Carrier_new_like(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"values", "mutable", "dtype", nullptr};
  PyObject* values;
  int mutable_ = 1;
  PyObject* dtype = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$pO:new_like", const_cast<char**>(kw), &values, &mutable_,
                                   &dtype))
    return nullptr;
  PyObject* d;
  if (parse_dtype_arg(dtype, &d) < 0) return nullptr;
  return native_new_like(self, values, mutable_ != 0, d);
}

PyObject* Carrier_allocate_like(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"size", "mutable", "dtype", "empty", nullptr};
  Py_ssize_t n;
  int mutable_ = 1, empty = 0;
  PyObject* dtype = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|$pOp:allocate_like", const_cast<char**>(kw), size_arg, &n, &mutable_,
                                   &dtype, &empty))
    return nullptr;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "allocate_like() size must be non-negative");
    return nullptr;
  }
  PyObject* d;
  if (parse_dtype_arg(dtype, &d) < 0) return nullptr;
  return native_allocate_like(self, n, mutable_ != 0, d, empty != 0);
}

PyObject* Carrier_dlpack_info(PyObject* self, PyObject*) { return native_dlpack_info(self); }

PyObject* Carrier_claim(PyObject* self, PyObject*) {
  int64_t t = carrier_claim(self);
  return t == 0 ? nullptr : PyLong_FromLongLong(t);
}

PyObject* Carrier_relinquish(PyObject* self, PyObject* arg) {
  int64_t t;
  if (parse_token(arg, &t) < 0 || carrier_relinquish(self, t) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Carrier_begin_access(PyObject* self, PyObject* arg) {
  int64_t t;
  if (parse_token(arg, &t) < 0 || carrier_begin_access(self, t) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Carrier_end_access(PyObject* self, PyObject* arg) {
  int64_t t;
  if (parse_token(arg, &t) < 0 || carrier_end_access(self, t) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Carrier_reserve(PyObject* self, PyObject* arg) {
  Py_ssize_t n;
  if (!size_arg(arg, &n)) return nullptr;
  int r = carrier_reserve(self, n);
  return r < 0 ? nullptr : PyBool_FromLong(r);
}

PyObject* Carrier_get_version(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(as_carrier(self)->version);
}

PyMethodDef Carrier_methods[] = {
    {"size", Carrier_size, METH_NOARGS, "Number of slots (0 after release for built-ins). Hook."},
    {"dtype", Carrier_dtype, METH_NOARGS, "Storage dtype. Hook."},
    {"get_value", Carrier_get_value, METH_O,
     "get_value(i): the value of slot i from the native storage (released -> RuntimeError, out of range -> "
     "IndexError; NotImplementedError for a carrier without native storage). Hook: an override may call "
     "super().get_value(i)."},
    {"set_value", method_cast(Carrier_set_value), METH_FASTCALL,
     "set_value(i, v): write v into slot i of the native storage, converted as c[i] = v converts it. Hook: "
     "an override may call super().set_value(i, v). The public write is c[i] = v, which also checks "
     "mutability and counts the version."},
    {"is_mutable", Carrier_is_mutable, METH_NOARGS,
     "Public mutability: constructed mutable and (not owned, or this thread holds owner access)."},
    {"_is_mutable", Carrier_priv_is_mutable, METH_NOARGS, "Hook: whether the carrier was constructed mutable."},
    {"is_owned", Carrier_is_owned, METH_NOARGS, "True while another carrier or a pending move owns it."},
    {"release", Carrier_release, METH_NOARGS,
     "Relinquish the storage (free it if owned by this carrier). Idempotent; RuntimeError when owned."},
    {"_release", Carrier_priv_release, METH_NOARGS, "Hook: free the storage (called once by release())."},
    {"is_released", Carrier_is_released, METH_NOARGS, "True after release()."},
    {"new_like", method_cast(Carrier_new_like),
     METH_VARARGS | METH_KEYWORDS,
     "new_like(values, *, mutable=True, dtype=None): fresh carrier of this exact class holding values. Hook."},
    {"allocate_like", method_cast(Carrier_allocate_like),
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like(size, *, mutable=True, dtype=None, empty=False): fresh zero-filled carrier of this exact "
     "class. Hook."},
    {"dlpack_info", Carrier_dlpack_info, METH_NOARGS,
     "Hook: dict with pointer, device_type, device_id; the default raises BufferError."},
    {"_claim_ownership", Carrier_claim, METH_NOARGS, "Claim ownership; returns the token."},
    {"_relinquish_ownership", Carrier_relinquish, METH_O, "Give ownership back (token)."},
    {"_begin_owner_access", Carrier_begin_access, METH_O,
     "Open a re-entrant owner-access scope on this thread (token)."},
    {"_end_owner_access", Carrier_end_access, METH_O, "Close one owner-access scope on this thread (token)."},
    {"__reduce__", carrier_reduce, METH_NOARGS,
     "pickle / copy.deepcopy: TypeError naming the class and the fix (CPU and Generic define their own)."},
    {"_reserve", Carrier_reserve, METH_O,
     "Grow an empty carrier to n zero slots; True when done, False when this carrier cannot allocate."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Carrier_getset[] = {
    {"version", Carrier_get_version, nullptr, "Count of successful public value writes.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMappingMethods Carrier_as_mapping = {nullptr, Carrier_subscript, Carrier_ass_subscript};

}  // namespace

PyTypeObject Carrier_Type = static_type("strideweave.Carrier", sizeof(CarrierObject));

// Python's thread ident: owner access is bound to it. An ident may be reused
// by a new thread after its thread ends, so an owner must close its scopes
// before its thread exits.
PyObject* carrier_values_snapshot(PyObject* values, const char* not_iterable) {
  PyObject* seq = PySequence_Fast(values, not_iterable);
  if (seq && PyList_Check(seq)) Py_SETREF(seq, PyList_AsTuple(seq));
  return seq;
}

int carrier_encode_new_value(sw::DTypeCode code, PyObject* v, unsigned char* out) {
  if (v != Py_None) return encode_slot(code, v, out);
  std::memset(out, 0, static_cast<size_t>(sw::codec::slot_bytes(code)));
  return 0;
}

Py_ssize_t carrier_encode_values(PyObject* values, sw::DTypeCode code, std::vector<unsigned char>* out) {
  Ref seq = Ref::steal(carrier_values_snapshot(values, "new_like() values must be iterable"));
  if (!seq) return -1;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  const size_t item = static_cast<size_t>(sw::codec::slot_bytes(code));
  if (engine_call([&] { out->resize(static_cast<size_t>(n) * item); }) < 0) return -1;
  PyObject** items = PySequence_Fast_ITEMS(seq.get());
  for (Py_ssize_t i = 0; i < n; ++i)
    if (carrier_encode_new_value(code, items[i], out->data() + static_cast<size_t>(i) * item) < 0) return -1;
  return n;
}

int carrier_parse_dtype(sw::CarrierKind kind, PyObject* dtype, sw::DTypeCode* out) {
  const char* name = sw::carrier_kind_name(kind);
  const int r = dtype_resolve(dtype, &dtype);
  if (r < 0) return -1;
  if (r == 0) {
    PyErr_Format(PyExc_TypeError, "%s dtype must be a DType (or a NumPy dtype), not %.100s", name, type_name(dtype));
    return -1;
  }
  if (!sw::supports_dtype(kind, dtype_code(dtype))) {
    PyErr_Format(PyExc_ValueError, "%s does not support dtype %R; %s", name, dtype, sw::supported_dtypes_hint(kind));
    return -1;
  }
  *out = dtype_code(dtype);
  return 0;
}

int carrier_dtype_arg(sw::CarrierKind kind, PyObject** dtype) {
  sw::DTypeCode code;
  if (carrier_parse_dtype(kind, *dtype, &code) < 0) return -1;
  *dtype = dtype_singleton(code) ? dtype_singleton(code) : *dtype;
  return 0;
}

uint64_t current_thread_id() { return static_cast<uint64_t>(PyThread_get_thread_ident()); }

bool carrier_overrides(PyObject* self, const char* name) {
  Ref n = Ref::steal(PyUnicode_InternFromString(name));
  if (!n) { PyErr_Clear(); return false; }
  return overrides(self, n.get());
}

PyObject* carrier_alloc(PyTypeObject* type, const CarrierVTable* vt) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  CarrierObject* o = as_carrier(self);
  o->weakreflist = nullptr;
  o->vt = vt;
  o->version = 0;
  new (&o->ownership) sw::Ownership();
  o->released = false;
  o->constructed_mutable = true;
  o->releasing = false;
  return self;
}

void carrier_dealloc(PyObject* self) {
  CarrierObject* o = as_carrier(self);
  if (o->weakreflist) PyObject_ClearWeakRefs(self);
  o->ownership.~Ownership();
  Py_TYPE(self)->tp_free(self);
}

Py_ssize_t carrier_size(PyObject* c) {
  if (!overrides(c, names().size)) return native_size(c);
  Ref r = Ref::steal(PyObject_CallMethodNoArgs(c, names().size));
  if (!r) return -1;
  if (!PyLong_Check(r.get())) {
    PyErr_Format(PyExc_TypeError, "%s.size() must return an int, not %.100s", type_name(c), type_name(r.get()));
    return -1;
  }
  Py_ssize_t n = PyLong_AsSsize_t(r.get());
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "%s.size() returned a negative size", type_name(c));
    return -1;
  }
  return n;
}

PyObject* carrier_dtype(PyObject* c) {
  if (!overrides(c, names().dtype)) return native_dtype(c);
  PyObject* r = PyObject_CallMethodNoArgs(c, names().dtype);
  if (r && !is_dtype(r)) {
    PyErr_Format(PyExc_TypeError, "%s.dtype() must return a DType, not %.100s", type_name(c), type_name(r));
    Py_CLEAR(r);
  }
  return r;
}

int carrier_is_released(PyObject* c) { return as_carrier(c)->released ? 1 : 0; }

int carrier_is_owned(PyObject* c) { return as_carrier(c)->ownership.is_owned() ? 1 : 0; }

int carrier_is_mutable(PyObject* c) {
  if (as_carrier(c)->releasing) return 0;
  int constructed;
  if (overrides(c, names().is_mutable)) {
    Ref r = Ref::steal(PyObject_CallMethodNoArgs(c, names().is_mutable));
    if (!r) return -1;
    constructed = PyObject_IsTrue(r.get());
    if (constructed < 0) return -1;
  } else {
    constructed = native_is_mutable(c);
  }
  if (!constructed) return 0;
  const sw::Ownership& own = as_carrier(c)->ownership;
  if (own.is_owned() && !own.has_access(current_thread_id())) return 0;
  return 1;
}

PyObject* carrier_get(PyObject* c, Py_ssize_t i) {
  if (check_live(c) < 0 || check_range(c, i) < 0) return nullptr;
  if (calls_slot_hook(c, names().get_value)) {
    Ref idx = Ref::steal(PyLong_FromSsize_t(i));
    if (!idx) return nullptr;
    HookScope running(c, names().get_value);
    return PyObject_CallMethodOneArg(c, names().get_value, idx.get());
  }
  CarrierObject* o = as_carrier(c);
  if (!o->vt) return not_implemented<PyObject*>(c, "get_value", nullptr);
  if (check_native_range(c, i) < 0) return nullptr;
  return o->vt->get(o, i);
}

int carrier_set_unchecked(PyObject* c, Py_ssize_t i, PyObject* v) {
  if (check_live(c) < 0 || check_range(c, i) < 0) return -1;
  if (calls_slot_hook(c, names().set_value)) {
    Ref idx = Ref::steal(PyLong_FromSsize_t(i));
    if (!idx) return -1;
    HookScope running(c, names().set_value);
    Ref r = Ref::steal(PyObject_CallMethodObjArgs(c, names().set_value, idx.get(), v, nullptr));
    return r ? 0 : -1;
  }
  CarrierObject* o = as_carrier(c);
  if (!o->vt) return not_implemented<int>(c, "set_value", -1);
  if (check_native_range(c, i) < 0) return -1;
  return o->vt->set(o, i, v);
}

int carrier_set(PyObject* c, Py_ssize_t i, PyObject* v) {
  if (check_live(c) < 0) return -1;
  int m = carrier_is_mutable(c);
  if (m < 0) return -1;
  if (!m) {
    if (carrier_is_owned(c))
      PyErr_Format(PyExc_RuntimeError,
                   "%s carrier is not mutable: it is owned by another carrier or a pending move", type_name(c));
    else
      PyErr_Format(PyExc_RuntimeError, "%s carrier is not mutable", type_name(c));
    return -1;
  }
  // Converting v for a native slot may run Python code (__float__,
  // __index__) that releases c or starts a move claiming it; a write after
  // that would be acknowledged and lost. So convert first and check again;
  // the converted value's write runs no Python code.
  Ref converted;
  CarrierObject* o = as_carrier(c);
  if (o->vt && !calls_slot_hook(c, names().set_value) && !PyFloat_CheckExact(v) && !PyLong_CheckExact(v) &&
      !PyBool_Check(v)) {
    converted = Ref::steal(value_coerce(o->vt->dtype_code(o), v));
    if (!converted) return -1;
    v = converted.get();
    m = o->released ? 0 : carrier_is_mutable(c);
    if (m < 0) return -1;
    if (!m) {
      PyErr_Format(PyExc_RuntimeError,
                   "%s carrier changed during the write: converting the value released it or a move or owner "
                   "claimed it; nothing was written",
                   type_name(c));
      return -1;
    }
  }
  // Inside c's own set_value override (self[i] = v there) the outer write
  // is the one that counts.
  const bool nested = hook_running(c, names().set_value);
  if (carrier_set_unchecked(c, i, v) < 0) return -1;
  if (!nested) as_carrier(c)->version += 1;
  return 0;
}

int carrier_release(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (o->released) return 0;
  if (o->ownership.is_owned()) {
    PyErr_Format(PyExc_RuntimeError, "cannot release %s carrier: it is owned by another carrier or a pending move",
                 type_name(c));
    return -1;
  }
  if (overrides(c, names().release)) {
    // While the hook runs the carrier is neither owned nor released yet:
    // refuse writes, claims (so new moves) and DLPack-visible mutability,
    // so nothing starts using storage that is about to go.
    o->releasing = true;
    Ref r = Ref::steal(PyObject_CallMethodNoArgs(c, names().release));
    o->releasing = false;
    if (!r) return -1;
    if (o->released) return 0;  // the hook released re-entrantly
  }
  // Built-in storage is always relinquished, even by an override that did
  // not call super()._release() (vt->release is idempotent).
  native_release(c);
  o->released = true;
  // A definition-backed carrier's StorageProvider.release() may raise (it
  // still ran exactly once and the carrier is released).
  if (PyErr_Occurred()) return -1;
  return 0;
}

PyObject* carrier_new_like(PyObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  PyObject* d;
  if (parse_dtype_arg(dtype, &d) < 0) return nullptr;
  if (!overrides(c, names().new_like)) return native_new_like(c, values, mutable_, d);
  // Measured before the hook runs (it may mutate values); an iterator
  // without a length sets no lower bound.
  Py_ssize_t n = PyObject_Length(values);
  if (n < 0) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return nullptr;
    PyErr_Clear();
    n = 0;
  }
  Ref method = Ref::steal(PyObject_GetAttr(c, names().new_like));
  if (!method) return nullptr;
  Ref args = Ref::steal(PyTuple_Pack(1, values));
  Ref kwargs = Ref::steal(
      Py_BuildValue("{O:O,s:O}", names().mutable_, mutable_ ? Py_True : Py_False, "dtype", d ? d : Py_None));
  if (!args || !kwargs) return nullptr;
  return check_like_result(c, PyObject_Call(method.get(), args.get(), kwargs.get()), "new_like", n, d);
}

PyObject* carrier_allocate_like(PyObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "allocate_like() size must be non-negative");
    return nullptr;
  }
  PyObject* d;
  if (parse_dtype_arg(dtype, &d) < 0) return nullptr;
  if (!overrides(c, names().allocate_like)) return native_allocate_like(c, n, mutable_, d, empty);
  Ref method = Ref::steal(PyObject_GetAttr(c, names().allocate_like));
  if (!method) return nullptr;
  Ref args = Ref::steal(Py_BuildValue("(n)", n));
  Ref kwargs = Ref::steal(Py_BuildValue("{O:O,s:O,O:O}", names().mutable_, mutable_ ? Py_True : Py_False, "dtype",
                                        d ? d : Py_None, names().empty, empty ? Py_True : Py_False));
  if (!args || !kwargs) return nullptr;
  return check_like_result(c, PyObject_Call(method.get(), args.get(), kwargs.get()), "allocate_like", n, d);
}

int carrier_reserve(PyObject* c, Py_ssize_t n) {
  if (check_live(c) < 0) return -1;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "reserve size must be non-negative");
    return -1;
  }
  CarrierObject* o = as_carrier(c);
  if (!o->vt || !o->vt->reserve) return 0;
  return o->vt->reserve(o, n);
}

void* carrier_host_data(PyObject* c) {
  CarrierObject* o = as_carrier(c);
  if (o->released || !o->vt || !o->vt->host_data) return nullptr;
  // Callers size their raw access by carrier_size() and read it with the
  // item size of carrier_dtype(): a Python size() or dtype() override may
  // claim more (or other) than the native buffer holds. Such a carrier gets
  // no raw access: moves copy it value by value through its (native,
  // range-checked) slot hooks and ops refuse it (issue 15 item 1).
  if (overrides(c, names().size) || overrides(c, names().dtype)) return nullptr;
  return o->vt->host_data(o);
}

PyObject* carrier_dlpack_info(PyObject* c) {
  if (!overrides(c, names().dlpack_info)) return native_dlpack_info(c);
  return PyObject_CallMethodNoArgs(c, names().dlpack_info);
}

int64_t carrier_claim(PyObject* c) {
  if (as_carrier(c)->released) {
    PyErr_Format(PyExc_RuntimeError, "cannot claim ownership of a released %s carrier", type_name(c));
    return 0;
  }
  if (as_carrier(c)->releasing) {
    PyErr_Format(PyExc_RuntimeError, "cannot claim ownership of a %s carrier that is being released", type_name(c));
    return 0;
  }
  int64_t t = as_carrier(c)->ownership.claim();
  if (t == 0) PyErr_Format(PyExc_RuntimeError, "%s carrier is already owned", type_name(c));
  return t;
}

int carrier_relinquish(PyObject* c, int64_t token) {
  if (as_carrier(c)->ownership.relinquish(token)) return 0;
  PyErr_Format(PyExc_RuntimeError, "token does not match the owner of this %s carrier", type_name(c));
  return -1;
}

int carrier_begin_access(PyObject* c, int64_t token) {
  if (as_carrier(c)->ownership.begin_access(token, current_thread_id())) return 0;
  PyErr_Format(PyExc_RuntimeError, "token does not match the owner of this %s carrier", type_name(c));
  return -1;
}

int carrier_end_access(PyObject* c, int64_t token) {
  if (as_carrier(c)->ownership.end_access(token, current_thread_id())) return 0;
  PyErr_Format(PyExc_RuntimeError,
               "token does not match the owner of this %s carrier, or no owner access is open on this thread",
               type_name(c));
  return -1;
}

int carrier_module_init(PyObject* module) {
  Carrier_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  Carrier_Type.tp_doc =
      "Base of all storage carriers: a flat run of size() slots of one storage dtype.\n\n"
      "Python subclasses call super().__init__() with no arguments and override the hooks size, dtype, "
      "get_value(i), set_value(i, v), _is_mutable, _release, new_like, allocate_like and dlpack_info. "
      "c[i] / c[i] = v go through the base's checks (released, mutability, range; negative indices are "
      "not wrapped and raise IndexError) and each successful write adds 1 to version.";
  Carrier_Type.tp_new = Carrier_new;
  Carrier_Type.tp_init = Carrier_init;
  Carrier_Type.tp_dealloc = Carrier_tp_dealloc;
  Carrier_Type.tp_repr = Carrier_repr;
  Carrier_Type.tp_weaklistoffset = offsetof(CarrierObject, weakreflist);
  Carrier_Type.tp_as_mapping = &Carrier_as_mapping;
  Carrier_Type.tp_methods = Carrier_methods;
  Carrier_Type.tp_getset = Carrier_getset;
  return add_type(module, &Carrier_Type, "Carrier");
}

}  // namespace swpy

// Definition-backed storage: the CarrierVTable a class with a
// CarrierDefinition gets, driving its slots through the StorageProvider's
// callables, and its constructor Cls(slots, *, dtype, mutable=True).
#include "extension/extension.hpp"
#include "carriers/kinds.hpp"
#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "extension/extension_api.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy {

namespace {

using ext::field;
using ext::g;
using ext::observe;

const char* oname(PyObject* o) { return type_name(o); }
const char* tname(PyTypeObject* t) { return type_name(t); }

// One vtable per storage dtype (sw::definition_storage_index): an
// instance's vt encodes its dtype.
extern const CarrierVTable kDefVT[sw::kDefinitionStorageCount];

sw::DTypeCode vt_dtype_code(CarrierObject* o) {
  return sw::definition_storage_code(static_cast<int>(o->vt - kDefVT));
}

PyObject* self_of(CarrierObject* o) { return reinterpret_cast<PyObject*>(o); }

// The instance's StorageProvider (its class was observed when it was built).
PyObject* storage_of(CarrierObject* o) {
  PyObject* s = nullptr;
  if (observe(Py_TYPE(o), &s) < 0) return nullptr;
  if (!s) PyErr_Format(PyExc_SystemError, "%s has no StorageProvider", oname(self_of(o)));
  return s;
}

// Calls the provider's callable name with (carrier, *extra). New reference or NULL.
PyObject* call_storage(CarrierObject* o, PyObject* name, PyObject* a = nullptr, PyObject* b = nullptr) {
  PyObject* s = storage_of(o);
  if (!s) return nullptr;
  Ref fn = Ref::steal(field(s, name));
  if (!fn) return nullptr;
  PyObject* args[3] = {self_of(o), a, b};
  return PyObject_Vectorcall(fn.get(), args, b ? 3 : (a ? 2 : 1), nullptr);
}

// allocate/write/release report success by returning None; anything else
// (a status code, True, a coroutine) is refused rather than trusted. An
// empty r passes the pending exception through. 0 / -1.
int expect_none(CarrierObject* o, Ref r, const char* hook) {
  if (!r) return -1;
  if (r.get() == Py_None) return 0;
  PyErr_Format(PyExc_TypeError, "%s StorageProvider.%s() must return None, not %.100s", oname(self_of(o)), hook,
               oname(r.get()));
  return -1;
}

Py_ssize_t vt_size(CarrierObject* o) {
  Ref r = Ref::steal(call_storage(o, g.name.physical_size));
  if (!r) return -1;
  if (!PyLong_Check(r.get()) || PyBool_Check(r.get())) {
    PyErr_Format(PyExc_TypeError, "%s StorageProvider.physical_size() must return an int, not %.100s",
                 oname(self_of(o)), oname(r.get()));
    return -1;
  }
  const Py_ssize_t n = PyLong_AsSsize_t(r.get());
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "%s StorageProvider.physical_size() returned a negative size", oname(self_of(o)));
    return -1;
  }
  return n;
}

PyObject* vt_get(CarrierObject* o, Py_ssize_t i) {
  Ref idx = Ref::steal(PyLong_FromSsize_t(i));
  if (!idx) return nullptr;
  Ref r = Ref::steal(call_storage(o, g.name.read, idx.get()));
  if (!r) return nullptr;
  // Reads return canonical values of the storage dtype, as built-ins do.
  return value_coerce(vt_dtype_code(o), r.get());
}

int vt_set(CarrierObject* o, Py_ssize_t i, PyObject* v) {
  Ref x = Ref::steal(value_coerce(vt_dtype_code(o), v));
  if (!x) return -1;
  Ref idx = Ref::steal(PyLong_FromSsize_t(i));
  if (!idx) return -1;
  return expect_none(o, Ref::steal(call_storage(o, g.name.write, idx.get(), x.get())), "write");
}

// Calls the provider's release exactly once (marking the carrier released
// first, so a re-entrant or repeated _release() does nothing). An exception
// stays set for carrier_release to report.
void vt_release(CarrierObject* o) {
  if (o->released) return;
  o->released = true;
  expect_none(o, Ref::steal(call_storage(o, g.name.release)), "release");  // the carrier stays released
}

// type(slots, dtype=dtype, mutable=mutable_): the construction contract.
PyObject* make_like(PyTypeObject* type, Py_ssize_t n, PyObject* dtype, bool mutable_) {
  Ref args = Ref::steal(Py_BuildValue("(n)", n));
  if (!args) return nullptr;
  Ref kwargs =
      Ref::steal(Py_BuildValue("{s:O,s:O}", "dtype", dtype, "mutable", mutable_ ? Py_True : Py_False));
  if (!kwargs) return nullptr;
  Ref r = Ref::steal(PyObject_Call(reinterpret_cast<PyObject*>(type), args.get(), kwargs.get()));
  if (r && Py_TYPE(r.get()) != type) {
    PyErr_Format(PyExc_TypeError, "%s(...) did not build a %s", tname(type), tname(type));
    return nullptr;
  }
  return r.release();
}

PyObject* vt_new_like(CarrierObject* o, PyObject* values, bool mutable_, PyObject* dtype) {
  if (!dtype) dtype = dtype_singleton(vt_dtype_code(o));  // kept after release
  Ref seq = Ref::steal(PySequence_Fast(values, "new_like() values must be iterable"));
  if (!seq) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  Ref c = Ref::steal(make_like(Py_TYPE(o), n, dtype, true));
  if (!c) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (carrier_set_unchecked(c.get(), i, PySequence_Fast_GET_ITEM(seq.get(), i)) < 0) return nullptr;
  as_carrier(c.get())->constructed_mutable = mutable_;
  return c.release();
}

PyObject* vt_allocate_like(CarrierObject* o, Py_ssize_t n, bool mutable_, PyObject* dtype, bool) {
  // allocate() provides zero slots, so empty=True is served the same way.
  if (!dtype) dtype = dtype_singleton(vt_dtype_code(o));
  return make_like(Py_TYPE(o), n, dtype, mutable_);
}

// allocate(carrier, n) and a check that it provided n slots. 0 / -1.
int allocate_slots(CarrierObject* o, Py_ssize_t n) {
  Ref count = Ref::steal(PyLong_FromSsize_t(n));
  if (!count || expect_none(o, Ref::steal(call_storage(o, g.name.allocate, count.get())), "allocate") < 0) return -1;
  Py_ssize_t got = vt_size(o);
  if (got < 0) return -1;
  if (got != n) {
    PyErr_Format(PyExc_ValueError, "%s StorageProvider.allocate(carrier, %zd) provided %zd slots", oname(self_of(o)),
                 n, got);
    return -1;
  }
  return 0;
}

int vt_reserve(CarrierObject* o, Py_ssize_t n) {
  Py_ssize_t size = vt_size(o);
  if (size < 0) return -1;
  if (size != 0) return 0;  // only an empty destination grows
  return allocate_slots(o, n) < 0 ? -1 : 1;
}

#define SW_DEF_VT                                                                                         \
  {                                                                                                       \
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like, vt_reserve, nullptr, \
        nullptr                                                                                           \
  }
static_assert(sw::kDefinitionStorageCount == 6, "one SW_DEF_VT per storage dtype");
const CarrierVTable kDefVT[sw::kDefinitionStorageCount] = {SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT, SW_DEF_VT};
#undef SW_DEF_VT

}  // namespace

int extension_carrier_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"slots", "dtype", "mutable", nullptr};
  PyObject* slots;
  PyObject* dtype = nullptr;
  int mutable_ = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$Op:__init__", const_cast<char**>(kw), &slots, &dtype, &mutable_))
    return -1;
  CarrierObject* o = as_carrier(self);
  const char* name = oname(self);
  if (o->vt || o->released) {
    PyErr_Format(PyExc_RuntimeError, "%s.__init__() cannot be called twice", name);
    return -1;
  }
  if (!dtype) {
    PyErr_Format(PyExc_TypeError, "%s() missing required keyword-only argument 'dtype'", name);
    return -1;
  }
  if (PyBool_Check(slots) || !PyIndex_Check(slots)) {
    PyErr_Format(PyExc_TypeError, "%s() slots must be an int, not %.100s", name, oname(slots));
    return -1;
  }
  Py_ssize_t n = PyNumber_AsSsize_t(slots, PyExc_OverflowError);
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "%s() slots must be non-negative", name);
    return -1;
  }
  const int resolved = dtype_resolve(dtype, &dtype);
  if (resolved < 0) return -1;
  if (resolved == 0) {
    PyErr_Format(PyExc_TypeError, "%s() dtype must be a DType (or a NumPy dtype), not %.100s", name, oname(dtype));
    return -1;
  }
  const int idx = sw::definition_storage_index(dtype_code(dtype));
  if (idx < 0) {
    PyErr_Format(PyExc_ValueError, "%s() dtype %R cannot be a storage dtype", name, dtype);
    return -1;
  }
  PyObject* storage = nullptr;
  if (observe(Py_TYPE(self), &storage) < 0) return -1;
  if (!storage) {
    PyErr_Format(PyExc_TypeError, "%s has no CarrierDefinition", name);
    return -1;
  }
  Ref supports = Ref::steal(field(storage, g.name.supports_dtype));
  if (!supports) return -1;
  PyObject* args2[2] = {self, dtype};
  Ref ok = Ref::steal(PyObject_Vectorcall(supports.get(), args2, 2, nullptr));
  if (!ok) return -1;
  if (!PyBool_Check(ok.get())) {
    PyErr_Format(PyExc_TypeError, "%s StorageProvider.supports_dtype() must return a bool", name);
    return -1;
  }
  if (ok.get() != Py_True) {
    PyErr_Format(PyExc_ValueError, "%s does not support dtype %R", name, dtype);
    return -1;
  }
  o->vt = &kDefVT[idx];
  o->constructed_mutable = mutable_ != 0;
  if (allocate_slots(o, n) < 0) {
    o->vt = nullptr;  // unusable, and __init__ may be retried
    return -1;
  }
  return 0;
}

}  // namespace swpy

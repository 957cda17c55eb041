// Generic: a carrier of Python objects held in a list. Values are coerced
// to the storage dtype on construction and on every write (Float32 rounded
// to binary32, Int32 range-checked, Bool strict), so reads return canonical
// Python values. Participates in cyclic GC: a slot may refer back to the
// carrier.
#include <new>
#include <utility>

#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy {

struct GenericObject {
  CarrierObject base;
  PyObject* values;   // list
  PyObject* dtype;
};

namespace {

GenericObject* as_generic(PyObject* o) { return reinterpret_cast<GenericObject*>(o); }
GenericObject* as_generic(CarrierObject* o) { return reinterpret_cast<GenericObject*>(o); }

// A dtype argument this kind stores (a NumPy dtype becomes its DType). 0 / -1.
int check_dtype(PyObject*& dtype) { return carrier_dtype_arg(sw::CarrierKind::Generic, &dtype); }

// New list of values coerced to code.
PyObject* coerce_all(sw::DTypeCode code, PyObject* values) {
  Ref seq = Ref::steal(carrier_values_snapshot(values, "Generic values must be iterable"));
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  PyObject** items = PySequence_Fast_ITEMS(seq.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = value_coerce(code, items[i]);
    if (!v) return nullptr;
    PyList_SET_ITEM(list.get(), i, v);
  }
  return list.release();
}

PyObject* zeros(sw::DTypeCode code, Py_ssize_t n) {
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* z = value_zero(code);
    if (!z) return nullptr;
    PyList_SET_ITEM(list.get(), i, z);
  }
  return list.release();
}

// Fresh instance of type (the receiver's exact class) taking ownership of
// list. Python __init__ of a subclass is not run.
PyObject* generic_make(PyTypeObject* type, PyObject* list, PyObject* dtype, bool mutable_) {
  Ref values = Ref::steal(list);
  Ref args = Ref::steal(PyTuple_New(0));
  if (!args) return nullptr;
  Ref self = Ref::steal(type->tp_new(type, args.get(), nullptr));
  if (!self) return nullptr;
  if (!PyObject_TypeCheck(self.get(), &Generic_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return a Generic carrier", type_name(type));
    return nullptr;
  }
  GenericObject* o = as_generic(self.get());
  Py_XSETREF(o->values, values.release());
  Py_SETREF(o->dtype, Py_NewRef(dtype));
  o->base.constructed_mutable = mutable_;
  return self.release();
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return dtype_code(as_generic(o)->dtype); }

Py_ssize_t vt_size(CarrierObject* o) {
  PyObject* v = as_generic(o)->values;
  return v ? PyList_GET_SIZE(v) : 0;
}

PyObject* vt_get(CarrierObject* o, Py_ssize_t i) { return Py_NewRef(PyList_GET_ITEM(as_generic(o)->values, i)); }

int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  GenericObject* o = as_generic(c);
  Ref x = Ref::steal(value_coerce(dtype_code(o->dtype), v));
  if (!x) return -1;
  // Coercion may run Python code (__index__, __float__): recheck the slot.
  if (!o->values || i >= PyList_GET_SIZE(o->values)) {
    PyErr_SetString(PyExc_RuntimeError, "Generic carrier changed during the write");
    return -1;
  }
  return PyList_SetItem(o->values, i, x.release());
}

void vt_release(CarrierObject* c) {
  // Detach first: dropping the values may run arbitrary finalizers.
  Ref detached = Ref::steal(std::exchange(as_generic(c)->values, nullptr));
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  if (!dtype) dtype = as_generic(c)->dtype;  // kept after release
  else if (check_dtype(dtype) < 0) return nullptr;
  PyObject* list = coerce_all(dtype_code(dtype), values);
  if (!list) return nullptr;
  return generic_make(Py_TYPE(c), list, dtype, mutable_);
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool) {
  // Python objects cannot be left uninitialised: empty=True also zero-fills.
  if (!dtype) dtype = as_generic(c)->dtype;
  else if (check_dtype(dtype) < 0) return nullptr;
  PyObject* list = zeros(dtype_code(dtype), n);
  if (!list) return nullptr;
  return generic_make(Py_TYPE(c), list, dtype, mutable_);
}

int vt_reserve(CarrierObject* c, Py_ssize_t n) {
  GenericObject* o = as_generic(c);
  if (vt_size(c) != 0) return 0;  // only an empty destination grows
  PyObject* list = zeros(dtype_code(o->dtype), n);
  if (!list) return -1;
  Py_XSETREF(o->values, list);
  return 1;
}

const CarrierVTable generic_vt = {
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
    vt_reserve, nullptr /* host_data */, nullptr /* dlpack_info: none */,
};

// ------------------------------------------------------------ Python type

PyObject* Generic_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &generic_vt);
  if (!self) return nullptr;
  GenericObject* o = as_generic(self);
  o->values = nullptr;  // set by __init__; NULL reads as empty
  o->dtype = Py_NewRef(dtype_singleton(sw::DTypeCode::Floating));
  return self;
}

int Generic_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"values", "dtype", "mutable", nullptr};
  PyObject* values;
  PyObject* dtype = dtype_singleton(sw::DTypeCode::Floating);
  int mutable_ = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$Op:Generic", const_cast<char**>(kw), &values, &dtype,
                                   &mutable_))
    return -1;
  GenericObject* o = as_generic(self);
  if (o->values || o->base.released) {
    PyErr_SetString(PyExc_RuntimeError, "Generic.__init__() cannot be called twice");
    return -1;
  }
  if (check_dtype(dtype) < 0) return -1;
  PyObject* list = coerce_all(dtype_code(dtype), values);
  if (!list) return -1;
  Py_XSETREF(o->values, list);
  Py_SETREF(o->dtype, Py_NewRef(dtype));
  o->base.constructed_mutable = mutable_ != 0;
  return 0;
}

int Generic_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_generic(self)->values);
  Py_VISIT(as_generic(self)->dtype);
  return 0;
}

int Generic_clear(PyObject* self) {
  // Only the values can form cycles; the dtype stays valid for the rest of
  // the object's life.
  Py_CLEAR(as_generic(self)->values);
  return 0;
}

void Generic_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(as_generic(self)->values);
  Py_CLEAR(as_generic(self)->dtype);
  carrier_dealloc(self);
}

PyMethodDef Generic_methods[] = {
    {"__reduce__", generic_reduce, METH_NOARGS,
     "pickle / copy.deepcopy: the class, values, dtype and mutability; loads as a fresh carrier."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject Generic_Type = static_type("strideweave.Generic", sizeof(GenericObject));

PyObject* generic_new_of_class(PyTypeObject* cls, PyObject* values, PyObject* dtype, bool mutable_) {
  if (check_dtype(dtype) < 0) return nullptr;
  PyObject* list = coerce_all(dtype_code(dtype), values);
  if (!list) return nullptr;
  return generic_make(cls, list, dtype, mutable_);
}

PyObject* generic_values_list(PyObject* generic) {
  PyObject* v = as_generic(generic)->values;
  return v ? PyList_GetSlice(v, 0, PyList_GET_SIZE(v)) : PyList_New(0);
}

int generic_module_init(PyObject* module) {
  Generic_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  Generic_Type.tp_doc =
      "Generic(values, *, dtype=DType.Floating, mutable=True)\n\n"
      "Storage of Python objects. dtypes: Any (objects as given), Floating (int or float, stored as float), "
      "Float32 (rounded to binary32), Int32 (int, range-checked), Bool (bool only). No DLPack export. "
      "allocate_like(..., empty=True) still zero-fills (objects cannot be uninitialised).";
  Generic_Type.tp_base = &Carrier_Type;
  Generic_Type.tp_new = Generic_new;
  Generic_Type.tp_init = Generic_init;
  Generic_Type.tp_dealloc = Generic_dealloc;
  Generic_Type.tp_traverse = Generic_traverse;
  Generic_Type.tp_clear = Generic_clear;
  Generic_Type.tp_free = PyObject_GC_Del;
  Generic_Type.tp_methods = Generic_methods;
  return add_type(module, &Generic_Type, "Generic");
}

}  // namespace swpy

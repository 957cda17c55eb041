// Tensor: a view (offset + layout) into a carrier, with its autograd slots.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "tensor/subtensor_rules.hpp"
#include "tensor_data.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

PyObject* Tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs);

PyObject* Tensor_alloc(PyTypeObject* type, Py_ssize_t nitems) {
  return pool_alloc<sizeof(TensorObject)>(module_state.tensor_pool, &Tensor_Type, type, nitems);
}

void Tensor_free(void* self) { pool_free(module_state.tensor_pool, &Tensor_Type, self); }

int Tensor_traverse(PyObject* self, visitproc visit, void* arg) {
  TensorObject* t = as_tensor(self);
  // No visit of Py_TYPE(self): Tensor_Type is static, and for a Python
  // subclass subtype_traverse visits the heap type itself.
  Py_VISIT(t->carrier);
  Py_VISIT(t->layout);
  Py_VISIT(t->dtype);
  Py_VISIT(t->representation);
  Py_VISIT(t->autograd_ctx);
  Py_VISIT(t->grad);
  Py_VISIT(t->view_source);
  return 0;
}

int Tensor_clear(PyObject* self) {
  TensorObject* t = as_tensor(self);
  // Carrier, layout and dtype stay: they cannot lead back to this tensor
  // except through objects whose own tp_clear breaks the cycle.
  Py_CLEAR(t->representation);
  Py_CLEAR(t->autograd_ctx);
  Py_CLEAR(t->grad);
  Py_CLEAR(t->view_source);
  return 0;
}

// Drops everything the tensor holds and frees it (tp_dealloc's body).
void tensor_free_contents(PyObject* self) {
  TensorObject* t = as_tensor(self);
  if (t->weakreflist) PyObject_ClearWeakRefs(self);
  Tensor_clear(self);
  Py_CLEAR(t->carrier);
  Py_CLEAR(t->layout);
  Py_CLEAR(t->dtype);
  // A Python subclass's type reference is dropped by subtype_dealloc.
  Py_TYPE(self)->tp_free(self);
}

void Tensor_dealloc(PyObject* self) {
  TensorObject* t = as_tensor(self);
  PyObject_GC_UnTrack(self);
  if (!t->representation && !t->autograd_ctx && !t->grad && !t->view_source && t->carrier &&
      Py_IS_TYPE(t->carrier, &CPU_Type)) {
    // A leaf over a native CPU carrier (every from_dlpack result) holds
    // nothing that leads to another tensor: no recursion to guard against.
    tensor_free_contents(self);
    return;
  }
  // A long .grad chain would otherwise recurse once per tensor.
  Py_TRASHCAN_BEGIN(self, Tensor_dealloc)
  tensor_free_contents(self);
  Py_TRASHCAN_END
}

// Builds a tensor object without validation (callers validated).
PyObject* tensor_alloc(PyTypeObject* type, PyObject* carrier, Py_ssize_t offset, PyObject* layout,
                       PyObject* dtype) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  TensorObject* t = as_tensor(self);
  t->carrier = Py_NewRef(carrier);
  t->offset = offset;
  t->layout = Py_NewRef(layout);
  t->dtype = Py_NewRef(dtype);
  t->representation = nullptr;
  t->autograd_ctx = nullptr;
  t->grad = nullptr;
  t->retains_grad = false;
  t->view_source = nullptr;
  t->view_version = 0;
  return self;
}

// Offset argument: a non-bool int, non-negative.
int parse_offset(PyObject* o, Py_ssize_t* out) {
  if (!PyLong_Check(o) || PyBool_Check(o)) {
    PyErr_Format(PyExc_TypeError, "offset must be an int, not %.100s", Py_TYPE(o)->tp_name);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  switch (sw::check_offset(v, overflow, PY_SSIZE_T_MAX)) {
    case sw::OffsetCheck::Negative:
      PyErr_SetString(PyExc_ValueError, "offset must be non-negative");
      return -1;
    case sw::OffsetCheck::TooLarge:
      PyErr_SetString(PyExc_ValueError, "offset exceeds carrier size");
      return -1;
    case sw::OffsetCheck::Ok:
      break;
  }
  *out = static_cast<Py_ssize_t>(v);
  return 0;
}

PyObject* tensor_validated(PyTypeObject* type, PyObject* carrier, PyObject* offset_obj, PyObject* layout) {
  if (!is_carrier(carrier)) {
    PyErr_Format(PyExc_TypeError, "Tensor carrier must be a Carrier instance, not %.100s",
                 Py_TYPE(carrier)->tp_name);
    return nullptr;
  }
  if (!is_layout(layout)) {
    PyErr_Format(PyExc_TypeError, "Tensor layout must be a Layout, not %.100s", Py_TYPE(layout)->tp_name);
    return nullptr;
  }
  Py_ssize_t offset;
  if (parse_offset(offset_obj, &offset) < 0) return nullptr;
  Py_ssize_t csize = carrier_size(carrier);
  if (csize < 0) return nullptr;
  const int64_t cosize = layout_of(layout).cosize();
  if (!sw::span_fits(offset, csize, cosize)) {
    PyErr_Format(PyExc_ValueError,
                 "offset %zd + layout cosize %lld exceeds carrier size %zd", offset,
                 static_cast<long long>(cosize), csize);
    return nullptr;
  }
  Ref dtype = Ref::steal(carrier_dtype(carrier));
  if (!dtype) return nullptr;
  return tensor_alloc(type, carrier, offset, layout, dtype.get());
}

PyObject* Tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"carrier", "offset", "layout", nullptr};
  PyObject *carrier, *offset, *layout;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:Tensor", const_cast<char**>(kwlist), &carrier,
                                   &offset, &layout))
    return nullptr;
  return tensor_validated(type, carrier, offset, layout);
}

// ---- members

PyObject* Tensor_get_carrier(PyObject* self, void*) { return Py_NewRef(as_tensor(self)->carrier); }
PyObject* Tensor_get_offset(PyObject* self, void*) { return PyLong_FromSsize_t(as_tensor(self)->offset); }
PyObject* Tensor_get_layout(PyObject* self, void*) { return Py_NewRef(as_tensor(self)->layout); }

PyObject* Tensor_get_version(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(as_carrier(as_tensor(self)->carrier)->version);
}

PyObject* Tensor_get_autograd_ctx(PyObject* self, void*) {
  PyObject* ctx;
  if (tensor_autograd_ctx(self, &ctx) < 0) return nullptr;
  return Py_NewRef(ctx ? ctx : Py_None);
}

int Tensor_set_autograd_ctx(PyObject* self, PyObject* value, void*) {
  TensorObject* t = as_tensor(self);
  Py_CLEAR(t->view_source);  // an explicit ctx replaces a deferred view node
  if (value == nullptr || value == Py_None) {
    Py_CLEAR(t->autograd_ctx);
    return 0;
  }
  if (!PyObject_TypeCheck(value, &Operation_Type)) {
    PyErr_Format(PyExc_TypeError, "autograd_ctx must be an Operation or None, not %.100s",
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  Py_XSETREF(t->autograd_ctx, Py_NewRef(value));
  return 0;
}

bool tensor_is_differentiable(PyObject* self) { return dtype_is_differentiable(as_tensor(self)->dtype); }

PyObject* Tensor_get_grad(PyObject* self, void*) {
  TensorObject* t = as_tensor(self);
  if (!tensor_is_differentiable(self)) {
    // A compound dtype is named by its class (whose name may change).
    PyObject* d = t->dtype;
    const char* name = !d ? "?"
                          : dtype_code(d) == sw::DTypeCode::Compound ? type_name(d)
                                                                     : reinterpret_cast<DTypeObject*>(d)->name;
    PyErr_Format(PyExc_RuntimeError, "%s %s tensor is not differentiable and has no grad", article(name), name);
    return nullptr;
  }
  if (!t->grad) Py_RETURN_NONE;
  return Py_NewRef(t->grad);
}

int Tensor_set_grad(PyObject* self, PyObject* value, void*) {
  TensorObject* t = as_tensor(self);
  if (value == nullptr || value == Py_None) {
    Py_CLEAR(t->grad);
    return 0;
  }
  if (!is_tensor(value)) {
    PyErr_Format(PyExc_TypeError, "grad must be a Tensor or None, not %.100s", Py_TYPE(value)->tp_name);
    return -1;
  }
  if (!tensor_is_differentiable(self)) {
    PyErr_SetString(PyExc_RuntimeError, "a non-differentiable tensor has no grad");
    return -1;
  }
  // The next backward sums into .grad: refuse now what it could not sum
  // (issue 15 item 15) instead of accepting it silently.
  if (tensor_reject_multi(value, "as grad") < 0) return -1;
  if (!tensor_is_differentiable(value)) {
    PyObject* d = as_tensor(value)->dtype;
    PyErr_Format(PyExc_TypeError, "grad must be a Float32 or Floating tensor, not %s",
                 d && dtype_code(d) != sw::DTypeCode::Compound ? reinterpret_cast<DTypeObject*>(d)->name
                                                               : "a compound dtype");
    return -1;
  }
  if (!(layout_of(t->layout).shape() == layout_of(as_tensor(value)->layout).shape())) {
    PyErr_Format(PyExc_ValueError, "grad of shape %R does not match the tensor's shape %R",
                 layout_shape_or_none(as_tensor(value)->layout), layout_shape_or_none(t->layout));
    return -1;
  }
  Py_XSETREF(t->grad, Py_NewRef(value));
  return 0;
}

PyObject* Tensor_size(PyObject* self, PyObject*) {
  return PyLong_FromLongLong(layout_of(as_tensor(self)->layout).size());
}

PyObject* Tensor_dtype(PyObject* self, PyObject*) { return Py_NewRef(as_tensor(self)->dtype); }

PyObject* Tensor_is_mutable(PyObject* self, PyObject*) {
  if (tensor_is_multi(self)) Py_RETURN_FALSE;
  int m = carrier_is_mutable(as_tensor(self)->carrier);
  if (m < 0) return nullptr;
  return PyBool_FromLong(m);
}

PyObject* Tensor_is_differentiable(PyObject* self, PyObject*) {
  return PyBool_FromLong(tensor_is_differentiable(self));
}

PyObject* Tensor_retain_grad(PyObject* self, PyObject*) {
  if (!tensor_is_differentiable(self)) {
    PyErr_SetString(PyExc_RuntimeError, "retain_grad() on a non-differentiable tensor");
    return nullptr;
  }
  as_tensor(self)->retains_grad = true;
  Py_RETURN_NONE;
}

PyObject* Tensor_from_representation(PyObject* cls, PyObject* rep);

PyObject* Tensor_get_representation(PyObject* self, void*);


// The value of a one-element tensor for float(), int() and bool(); what
// names the conversion in the message of a larger tensor.
PyObject* single_value(PyObject* self, const char* what) {
  const int64_t n = layout_of(as_tensor(self)->layout).size();
  if (n != 1) {
    Ref shape = Ref::steal(tensor_get_shape(self, nullptr));
    if (!shape) return nullptr;
    PyErr_Format(PyExc_TypeError,
                 "%s() needs a one-element tensor, this one has %lld elements (shape %R); index one element "
                 "(t[i]) or reduce it first",
                 what, static_cast<long long>(n), shape.get());
    return nullptr;
  }
  return tensor_item(self, nullptr);
}

PyObject* Tensor_nb_float(PyObject* self) {
  Ref v = Ref::steal(single_value(self, "float"));
  return v ? PyNumber_Float(v.get()) : nullptr;
}

PyObject* Tensor_nb_int(PyObject* self) {
  Ref v = Ref::steal(single_value(self, "int"));
  return v ? PyNumber_Long(v.get()) : nullptr;
}

// NumPy's rule: the truth of the one element; more elements, or none (an
// empty tensor), are ambiguous.
int Tensor_nb_bool(PyObject* self) {
  const int64_t n = layout_of(as_tensor(self)->layout).size();
  if (n != 1) {
    Ref shape = Ref::steal(tensor_get_shape(self, nullptr));
    if (!shape) return -1;
    if (n == 0)
      PyErr_Format(PyExc_ValueError,
                   "the truth value of an empty tensor is ambiguous (shape %R): test t.size() > 0 to check that "
                   "it is not empty",
                   shape.get());
    else
      PyErr_Format(PyExc_ValueError,
                   "the truth value of a tensor with more than one element is ambiguous (shape %R): compare "
                   "elements, or test t.size() or a reduction instead",
                   shape.get());
    return -1;
  }
  Ref v = Ref::steal(tensor_item(self, nullptr));
  return v ? PyObject_IsTrue(v.get()) : -1;
}

PyNumberMethods Tensor_as_number = {};
PyMappingMethods Tensor_as_mapping = {tensor_len, tensor_getitem, tensor_setitem};

PyMethodDef Tensor_methods[] = {
    {"size", Tensor_size, METH_NOARGS, "Logical element count (the layout's size)."},
    {"dtype", Tensor_dtype, METH_NOARGS, "Logical dtype."},
    {"is_mutable", Tensor_is_mutable, METH_NOARGS,
     "True for a single-subtensor tensor whose carrier is publicly mutable."},
    {"is_differentiable", Tensor_is_differentiable, METH_NOARGS,
     "True when the logical dtype is Float32 or Floating."},
    {"retain_grad", Tensor_retain_grad, METH_NOARGS, "Keep .grad on this non-leaf tensor after backward."},
    {"backward", method_cast(tensor_backward),
     METH_VARARGS | METH_KEYWORDS, "backward(gradient=None, retain_graph=False): reverse-mode traversal."},
    // FASTCALL: METH_VARARGS would build a kwargs dict on every export.
    {"__dlpack__", method_cast(tensor_dlpack_fastcall),
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, stream=None, *, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Zero-copy DLPack export."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nThe exporting carrier's DLPack device."},
    {"tolist", tensor_tolist, METH_NOARGS,
     "tolist($self, /)\n--\n\nThe values as nested lists, one level per leaf mode (what "
     "np.from_dlpack(t).tolist() gives); a rank-0 tensor gives its scalar."},
    {"item", tensor_item, METH_NOARGS,
     "item($self, /)\n--\n\nThe single value of a one-element tensor (ValueError otherwise)."},
    {"__array__", method_cast(tensor_array),
     METH_VARARGS | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\nNumPy 2 protocol: a CPU Float32/Int32 tensor gives "
     "the zero-copy view np.from_dlpack gives unless copy=True; any other tensor gives a copy, and "
     "copy=False then raises ValueError."},
    {"numpy", tensor_numpy, METH_NOARGS,
     "numpy($self, /)\n--\n\nnp.asarray(t): the zero-copy view for a CPU Float32/Int32 tensor, a copy otherwise."},
    {"__reduce__", tensor_reduce, METH_NOARGS,
     "pickle / copy.deepcopy: Tensor(carrier, offset, layout); the loaded tensor is a leaf over a fresh "
     "carrier (CPU and Generic carriers pickle; others raise TypeError)."},
    {"_from_representation", Tensor_from_representation, METH_O | METH_CLASS,
     "Build a tensor from a validated TensorRepresentation."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Tensor_getset[] = {
    {"carrier", Tensor_get_carrier, nullptr, "the carrier given", nullptr},
    {"offset", Tensor_get_offset, nullptr, "offset into the carrier, in slots", nullptr},
    {"layout", Tensor_get_layout, nullptr, "the layout given", nullptr},
    {"version", Tensor_get_version, nullptr, "the carrier's version", nullptr},
    {"shape", tensor_get_shape, nullptr,
     "tuple of the size of each top-level mode (a hierarchical mode counts all its coordinates)", nullptr},
    {"ndim", tensor_get_ndim, nullptr, "number of top-level modes", nullptr},
    {"autograd_ctx", Tensor_get_autograd_ctx, Tensor_set_autograd_ctx,
     "the Operation that produced this tensor, or None for a leaf", nullptr},
    {"grad", Tensor_get_grad, Tensor_set_grad, "accumulated gradient", nullptr},
    {"_representation", Tensor_get_representation, nullptr,
     "the authoritative TensorRepresentation (multi-subtensor tensors)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject Tensor_Type = static_type("strideweave.Tensor", sizeof(TensorObject));

PyObject* tensor_over_native(PyObject* carrier, PyObject* layout, sw::DTypeCode dtype) {
  return tensor_alloc(&Tensor_Type, carrier, 0, layout, dtype_singleton(dtype));
}

int tensor_autograd_ctx(PyObject* self, PyObject** out) {
  TensorObject* t = as_tensor(self);
  if (!t->autograd_ctx && t->view_source) {
    PyObject* node = view_node(self);
    if (!node) return -1;
    t->autograd_ctx = node;
    Py_CLEAR(t->view_source);
  }
  *out = t->autograd_ctx;
  return 0;
}

PyObject* tensor_alloc_view(PyObject* t, Py_ssize_t offset, PyObject* layout) {
  return tensor_alloc(&Tensor_Type, as_tensor(t)->carrier, offset, layout, as_tensor(t)->dtype);
}

PyObject* tensor_new(PyObject* carrier, Py_ssize_t offset, PyObject* layout) {
  Ref off = Ref::steal(PyLong_FromSsize_t(offset));
  if (!off) return nullptr;
  return tensor_validated(&Tensor_Type, carrier, off.get(), layout);
}

int tensor_reject_multi(PyObject* t, const char* reason) {
  if (!tensor_is_multi(t)) return 0;
  PyErr_Format(PyExc_NotImplementedError,
               "Multi-subtensor Tensor %s is not implemented (only single-subtensor tensors are "
               "supported)",
               reason);
  return -1;
}

// Defined in representation.cpp.
PyObject* representation_build_tensor(PyObject* rep);
PyObject* representation_of_single(PyObject* tensor);

namespace {
PyObject* Tensor_from_representation(PyObject*, PyObject* rep) { return representation_build_tensor(rep); }

PyObject* Tensor_get_representation(PyObject* self, void*) {
  TensorObject* t = as_tensor(self);
  if (t->representation) return Py_NewRef(t->representation);
  return representation_of_single(self);
}
}  // namespace

// Used by representation.cpp to make a tensor under a compound logical dtype:
// rep is the multi-subtensor representation, or NULL for a one-plane
// compound dtype (one subtensor: an ordinary single-subtensor tensor).
PyObject* tensor_alloc_multi(PyObject* rep, PyObject* logical_dtype, PyObject* carrier, Py_ssize_t offset,
                             PyObject* layout) {
  PyObject* t = tensor_alloc(&Tensor_Type, carrier, offset, layout, logical_dtype);
  if (!t) return nullptr;
  as_tensor(t)->representation = Py_XNewRef(rep);
  return t;
}

int tensor_module_init(PyObject* module) {
  Tensor_as_number.nb_add = tensor_add;
  Tensor_as_number.nb_subtract = tensor_sub;
  Tensor_as_number.nb_multiply = tensor_mul;
  Tensor_as_number.nb_true_divide = tensor_truediv;
  Tensor_as_number.nb_negative = tensor_neg;
  Tensor_as_number.nb_float = Tensor_nb_float;
  Tensor_as_number.nb_int = Tensor_nb_int;
  Tensor_as_number.nb_bool = Tensor_nb_bool;
  Tensor_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  Tensor_Type.tp_doc =
      "Tensor(carrier, offset, layout): a strided view of a carrier's slots.";
  Tensor_Type.tp_new = Tensor_new;
  Tensor_Type.tp_dealloc = Tensor_dealloc;
  Tensor_Type.tp_alloc = Tensor_alloc;
  Tensor_Type.tp_free = Tensor_free;
  Tensor_Type.tp_traverse = Tensor_traverse;
  Tensor_Type.tp_clear = Tensor_clear;
  Tensor_Type.tp_repr = tensor_repr;
  Tensor_Type.tp_as_number = &Tensor_as_number;
  Tensor_Type.tp_as_mapping = &Tensor_as_mapping;
  Tensor_Type.tp_iter = tensor_iter;
  Tensor_Type.tp_methods = Tensor_methods;
  Tensor_Type.tp_getset = Tensor_getset;
  Tensor_Type.tp_weaklistoffset = offsetof(TensorObject, weakreflist);
  if (add_type(module, &Tensor_Type, "Tensor") < 0) return -1;
  // Above ndarray's 0 (torch's value): NumPy scalars and arrays then defer
  // to Tensor's reflected operators, so np.float32(2) * t is a Tensor (and
  // an ndarray operand is refused) instead of an ndarray made through
  // __array__.
  Ref priority = Ref::steal(PyFloat_FromDouble(1000.0));
  if (!priority || PyDict_SetItemString(Tensor_Type.tp_dict, "__array_priority__", priority.get()) < 0) return -1;
  PyType_Modified(&Tensor_Type);
  return tensor_data_module_init(module);
}

}  // namespace swpy

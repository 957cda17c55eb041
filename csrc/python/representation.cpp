// TensorRepresentation and Subtensor (strideweave.core): the authoritative
// multi-subtensor description and Tensor._from_representation validation.
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "tensor/subtensor_rules.hpp"
#include "util/args.hpp"
#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swpy {

PyObject* tensor_alloc_multi(PyObject* rep, PyObject* logical_dtype, PyObject* carrier, Py_ssize_t offset,
                             PyObject* layout);

namespace {

struct SubtensorObject {
  PyObject_HEAD
  PyObject* dtype;
  PyObject* carrier;
  Py_ssize_t offset;
  PyObject* layout;
};

struct RepresentationObject {
  PyObject_HEAD
  PyObject* logical_dtype;
  PyObject* subtensors;        // tuple of Subtensor
  PyObject* adjacent_layouts;  // tuple of Layout
};

PyTypeObject Subtensor_Type = static_type("strideweave.core.Subtensor", sizeof(SubtensorObject));
PyTypeObject Representation_Type = static_type("strideweave.core.TensorRepresentation", sizeof(RepresentationObject));

SubtensorObject* as_sub(PyObject* o) { return reinterpret_cast<SubtensorObject*>(o); }
RepresentationObject* as_rep(PyObject* o) { return reinterpret_cast<RepresentationObject*>(o); }

PyObject* Subtensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"dtype", "carrier", "offset", "layout", nullptr};
  PyObject *dtype, *carrier, *layout;
  Py_ssize_t offset;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO&O:Subtensor", const_cast<char**>(kwlist), &dtype, &carrier,
                                   offset_arg, &offset, &layout))
    return nullptr;
  if (!is_dtype(dtype)) {
    PyErr_SetString(PyExc_TypeError, "Subtensor dtype must be a DType");
    return nullptr;
  }
  if (!is_carrier(carrier)) {
    PyErr_SetString(PyExc_TypeError, "Subtensor carrier must be a Carrier instance");
    return nullptr;
  }
  if (!is_layout(layout)) {
    PyErr_SetString(PyExc_TypeError, "Subtensor layout must be a Layout");
    return nullptr;
  }
  if (offset < 0) {
    PyErr_SetString(PyExc_ValueError, "offset must be non-negative");
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  as_sub(self)->dtype = Py_NewRef(dtype);
  as_sub(self)->carrier = Py_NewRef(carrier);
  as_sub(self)->offset = offset;
  as_sub(self)->layout = Py_NewRef(layout);
  return self;
}

int Subtensor_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_sub(self)->dtype);
  Py_VISIT(as_sub(self)->carrier);
  Py_VISIT(as_sub(self)->layout);
  return 0;
}
int Subtensor_clear(PyObject* self) {
  Py_CLEAR(as_sub(self)->dtype);
  Py_CLEAR(as_sub(self)->carrier);
  Py_CLEAR(as_sub(self)->layout);
  return 0;
}
void Subtensor_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Subtensor_clear(self);
  Py_TYPE(self)->tp_free(self);
}
PyObject* Subtensor_repr(PyObject* self) {
  SubtensorObject* s = as_sub(self);
  return PyUnicode_FromFormat("Subtensor(dtype=%R, carrier=%s, offset=%zd, layout=%R)", s->dtype,
                              s->carrier ? Py_TYPE(s->carrier)->tp_name : "?", s->offset, s->layout);
}

PyObject* Subtensor_get(PyObject* self, void* which) {
  SubtensorObject* s = as_sub(self);
  switch (reinterpret_cast<intptr_t>(which)) {
    case 0: return Py_NewRef(s->dtype);
    case 1: return Py_NewRef(s->carrier);
    case 2: return PyLong_FromSsize_t(s->offset);
    default: return Py_NewRef(s->layout);
  }
}

PyGetSetDef Subtensor_getset[] = {
    {"dtype", Subtensor_get, nullptr, "storage dtype of this plane", reinterpret_cast<void*>(0)},
    {"carrier", Subtensor_get, nullptr, "carrier of this plane", reinterpret_cast<void*>(1)},
    {"offset", Subtensor_get, nullptr, "offset into the carrier", reinterpret_cast<void*>(2)},
    {"layout", Subtensor_get, nullptr, "layout of this plane", reinterpret_cast<void*>(3)},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* Representation_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"logical_dtype", "subtensors", "adjacent_layouts", nullptr};
  PyObject *dtype, *subs, *adj = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:TensorRepresentation", const_cast<char**>(kwlist), &dtype,
                                   &subs, &adj))
    return nullptr;
  if (!is_dtype(dtype)) {
    PyErr_SetString(PyExc_TypeError, "logical_dtype must be a DType");
    return nullptr;
  }
  Ref sub_t = Ref::steal(PySequence_Tuple(subs));
  if (!sub_t) return nullptr;
  Ref adj_t = Ref::steal(adj ? PySequence_Tuple(adj) : PyTuple_New(0));
  if (!adj_t) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sub_t.get()); ++i) {
    if (!PyObject_TypeCheck(PyTuple_GET_ITEM(sub_t.get(), i), &Subtensor_Type)) {
      PyErr_SetString(PyExc_TypeError, "subtensors must hold Subtensor objects");
      return nullptr;
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(adj_t.get()); ++i) {
    if (!is_layout(PyTuple_GET_ITEM(adj_t.get(), i))) {
      PyErr_SetString(PyExc_TypeError, "adjacent_layouts must hold Layout objects");
      return nullptr;
    }
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  as_rep(self)->logical_dtype = Py_NewRef(dtype);
  as_rep(self)->subtensors = sub_t.release();
  as_rep(self)->adjacent_layouts = adj_t.release();
  return self;
}

int Representation_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_rep(self)->logical_dtype);
  Py_VISIT(as_rep(self)->subtensors);
  Py_VISIT(as_rep(self)->adjacent_layouts);
  return 0;
}
int Representation_clear(PyObject* self) {
  Py_CLEAR(as_rep(self)->logical_dtype);
  Py_CLEAR(as_rep(self)->subtensors);
  Py_CLEAR(as_rep(self)->adjacent_layouts);
  return 0;
}
void Representation_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Representation_clear(self);
  Py_TYPE(self)->tp_free(self);
}
PyObject* Representation_repr(PyObject* self) {
  RepresentationObject* r = as_rep(self);
  return PyUnicode_FromFormat("TensorRepresentation(logical_dtype=%R, subtensors=%R, adjacent_layouts=%R)",
                              r->logical_dtype, r->subtensors, r->adjacent_layouts);
}
PyObject* Representation_get(PyObject* self, void* which) {
  RepresentationObject* r = as_rep(self);
  switch (reinterpret_cast<intptr_t>(which)) {
    case 0: return Py_NewRef(r->logical_dtype);
    case 1: return Py_NewRef(r->subtensors);
    default: return Py_NewRef(r->adjacent_layouts);
  }
}
PyGetSetDef Representation_getset[] = {
    {"logical_dtype", Representation_get, nullptr, "logical dtype", reinterpret_cast<void*>(0)},
    {"subtensors", Representation_get, nullptr, "tuple of Subtensor", reinterpret_cast<void*>(1)},
    {"adjacent_layouts", Representation_get, nullptr, "layouts between consecutive levels",
     reinterpret_cast<void*>(2)},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// Checks one subtensor against its plane dtype; -1 with ValueError/TypeError.
int validate_subtensor(PyObject* sub, PyObject* plane, Py_ssize_t i) {
  SubtensorObject* s = as_sub(sub);
  if (plane && s->dtype != plane) {
    PyErr_Format(PyExc_ValueError, "subtensor %zd dtype %R does not match plane dtype %R", i, s->dtype, plane);
    return -1;
  }
  Ref cdt = Ref::steal(carrier_dtype(s->carrier));
  if (!cdt) return -1;
  if (cdt.get() != s->dtype) {
    PyErr_Format(PyExc_ValueError, "subtensor %zd dtype %R is not its carrier's dtype", i, s->dtype);
    return -1;
  }
  Py_ssize_t csize = carrier_size(s->carrier);
  if (csize < 0) return -1;
  if (!sw::span_fits(s->offset, csize, layout_of(s->layout).cosize())) {
    PyErr_Format(PyExc_ValueError, "subtensor %zd span exceeds carrier size %zd", i, csize);
    return -1;
  }
  return 0;
}

}  // namespace

PyObject* representation_build_tensor(PyObject* rep) {
  if (!PyObject_TypeCheck(rep, &Representation_Type)) {
    PyErr_Format(PyExc_TypeError, "_from_representation() expects a TensorRepresentation, not %.100s",
                 Py_TYPE(rep)->tp_name);
    return nullptr;
  }
  RepresentationObject* r = as_rep(rep);
  const Py_ssize_t n = PyTuple_GET_SIZE(r->subtensors);
  const Py_ssize_t n_adjacent = PyTuple_GET_SIZE(r->adjacent_layouts);
  PyObject* dt = r->logical_dtype;
  PyObject* planes = reinterpret_cast<DTypeObject*>(dt)->simple_types;
  const Py_ssize_t n_planes = planes ? PyTuple_GET_SIZE(planes) : 0;
  switch (sw::classify_representation(planes != nullptr, static_cast<size_t>(n_planes), static_cast<size_t>(n),
                                      static_cast<size_t>(n_adjacent))) {
    case sw::RepresentationForm::NoSubtensors:
      PyErr_SetString(PyExc_ValueError, "a TensorRepresentation needs at least one subtensor");
      return nullptr;
    case sw::RepresentationForm::NeedsCompound:
      PyErr_Format(PyExc_ValueError,
                   "a multi-subtensor representation needs a CompoundDType logical dtype, not %R", dt);
      return nullptr;
    case sw::RepresentationForm::PlaneCount:
      PyErr_Format(PyExc_ValueError, "%R has %zd planes but the representation has %zd subtensors", dt, n_planes,
                   n);
      return nullptr;
    case sw::RepresentationForm::AdjacentCount:
      PyErr_Format(PyExc_ValueError, "%zd subtensors need %zd adjacent layouts, got %zd", n, n - 1, n_adjacent);
      return nullptr;
    case sw::RepresentationForm::Single: {
      // A one-subtensor representation of a simple dtype is an ordinary tensor.
      PyObject* only = PyTuple_GET_ITEM(r->subtensors, 0);
      if (validate_subtensor(only, dt, 0) < 0) return nullptr;
      return tensor_new(as_sub(only)->carrier, as_sub(only)->offset, as_sub(only)->layout);
    }
    case sw::RepresentationForm::Multi:
      break;
  }
  PyObject* first = PyTuple_GET_ITEM(r->subtensors, 0);
  PyTypeObject* cls = Py_TYPE(as_sub(first)->carrier);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* sub = PyTuple_GET_ITEM(r->subtensors, i);
    if (Py_TYPE(as_sub(sub)->carrier) != cls) {
      PyErr_Format(PyExc_ValueError, "all subtensor carriers must have one exact class (%s vs %s)", cls->tp_name,
                   Py_TYPE(as_sub(sub)->carrier)->tp_name);
      return nullptr;
    }
    if (validate_subtensor(sub, PyTuple_GET_ITEM(planes, i), i) < 0) return nullptr;
  }
  for (Py_ssize_t i = 0; i + 1 < n; ++i) {
    const sw::Layout& adj = layout_of(PyTuple_GET_ITEM(r->adjacent_layouts, i));
    const sw::Layout& src = layout_of(as_sub(PyTuple_GET_ITEM(r->subtensors, i))->layout);
    if (!sw::adjacent_fits(adj, src)) {
      PyErr_Format(PyExc_ValueError, "adjacent layout %zd must have subtensor %zd's shape as its domain", i, i);
      return nullptr;
    }
  }
  // One plane means one subtensor: not a multi-subtensor tensor, so it keeps
  // the compound logical dtype but no representation (DLPack then refuses
  // it on its dtype, as the spec requires for every compound dtype).
  return tensor_alloc_multi(n > 1 ? rep : nullptr, dt, as_sub(first)->carrier, as_sub(first)->offset,
                            as_sub(first)->layout);
}

PyObject* representation_of_single(PyObject* tensor) {
  TensorObject* t = as_tensor(tensor);
  // The plane's dtype: the logical dtype, or a one-plane compound's plane.
  PyObject* planes = reinterpret_cast<DTypeObject*>(t->dtype)->simple_types;
  PyObject* plane = planes ? PyTuple_GET_ITEM(planes, 0) : t->dtype;
  PyObject* sub = PyObject_CallFunction(reinterpret_cast<PyObject*>(&Subtensor_Type), "OOnO", plane, t->carrier,
                                        t->offset, t->layout);
  if (!sub) return nullptr;
  PyObject* rep = PyObject_CallFunction(reinterpret_cast<PyObject*>(&Representation_Type), "O(N)()", t->dtype, sub);
  return rep;
}

int representation_module_init(PyObject* module) {
  Subtensor_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  Subtensor_Type.tp_doc = "Subtensor(dtype, carrier, offset, layout): one storage plane of a tensor.";
  Subtensor_Type.tp_new = Subtensor_new;
  Subtensor_Type.tp_dealloc = Subtensor_dealloc;
  Subtensor_Type.tp_traverse = Subtensor_traverse;
  Subtensor_Type.tp_clear = Subtensor_clear;
  Subtensor_Type.tp_repr = Subtensor_repr;
  Subtensor_Type.tp_getset = Subtensor_getset;
  Representation_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  Representation_Type.tp_doc =
      "TensorRepresentation(logical_dtype, subtensors, adjacent_layouts): ordered subtensors under a "
      "logical dtype.";
  Representation_Type.tp_new = Representation_new;
  Representation_Type.tp_dealloc = Representation_dealloc;
  Representation_Type.tp_traverse = Representation_traverse;
  Representation_Type.tp_clear = Representation_clear;
  Representation_Type.tp_repr = Representation_repr;
  Representation_Type.tp_getset = Representation_getset;
  if (add_type(module, &Subtensor_Type, "Subtensor") < 0) return -1;
  return add_type(module, &Representation_Type, "TensorRepresentation");
}

}  // namespace swpy

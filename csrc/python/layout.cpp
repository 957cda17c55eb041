// Layout: an immutable (Shape, Stride) pair; the math lives in the engine
// (csrc/engine/layout/layout.cpp), this file only parses and converts.
//
// Decisions where API.md is silent:
//  - is_injective is a property (like size and cosize); the engine answers
//    exactly for every practical layout, see Layout::is_injective.
//  - layout[i] / iteration yield top-level modes as Layouts (a leaf mode i
//    gives Layout(Shape(e), Stride(s))); layout[a:b] gives the Layout of
//    those modes.
//  - Keys are strict: only int parts (not bool; any object with __index__,
//    such as NumPy integers, counts as an int) and tuple/list parts; a
//    tuple/list where the shape has a leaf is "not in domain" (ValueError).
//  - Layout.canonical(x) with a non-Shape x raises TypeError, as
//    broadcast_to does.
#include <algorithm>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "layout_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "keys.hpp"
#include "layout/keys.hpp"
#include "layout/tree_rules.hpp"
#include "util/args.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

constexpr const char* kNotInDomain = "Key is not in domain of shape";

LayoutObject* as_layout(PyObject* o) { return reinterpret_cast<LayoutObject*>(o); }

// A Layout object holding shape and stride (either may be empty: built on
// first use).
PyObject* layout_alloc(Ref shape, Ref stride, sw::Layout l) {
  PyObject* self = Layout_Type.tp_alloc(&Layout_Type, 0);
  if (!self) return nullptr;
  as_layout(self)->shape = shape.release();
  as_layout(self)->stride = stride.release();
  new (&as_layout(self)->layout) sw::Layout(std::move(l));
  return self;
}

PyObject* Layout_new(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"shape", "stride", nullptr};
  PyObject *shape, *stride;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Layout", const_cast<char**>(kwlist), &shape, &stride))
    return nullptr;
  if (!PyObject_TypeCheck(shape, &Shape_Type)) {
    PyErr_Format(PyExc_ValueError, "Layout shape must be a Shape, got %.100s", Py_TYPE(shape)->tp_name);
    return nullptr;
  }
  if (!PyObject_TypeCheck(stride, &Stride_Type)) {
    PyErr_Format(PyExc_ValueError, "Layout stride must be a Stride, got %.100s", Py_TYPE(stride)->tp_name);
    return nullptr;
  }
  return engine_new([&] {
    sw::Layout l(tree_of(shape), tree_of(stride));
    return layout_alloc(Ref::borrow(shape), Ref::borrow(stride), std::move(l));
  });
}

void Layout_dealloc(PyObject* self) {
  Py_CLEAR(as_layout(self)->last_view);
  as_layout(self)->layout.~Layout();
  std::free(as_layout(self)->dl_dims);
  Py_CLEAR(as_layout(self)->shape);
  Py_CLEAR(as_layout(self)->stride);
  Py_TYPE(self)->tp_free(self);
}

// ---- keys: the walk is the engine's (layout_keys.hpp); this reader turns
// Python key parts into ordinals and item lists.

int bad_part(PyObject* part) {
  PyErr_Format(PyExc_TypeError, "Layout key part must be an int or a tuple/list, got %.100s",
               Py_TYPE(part)->tp_name);
  return -1;
}

// An int part: a non-bool int or any object with __index__ (NumPy integers).
bool is_int_part(PyObject* part) {
  if (is_bool(part)) return false;
  return PyLong_Check(part) || (!PyTuple_Check(part) && !PyList_Check(part) && PyIndex_Check(part));
}

struct KeyReader {
  // The items of a sequence part as an immutable tuple: an __index__ part
  // runs Python code that could resize a list under us (a copy for lists;
  // tuples are used as they are).
  struct Items {
    Ref tuple;
    size_t size() const { return static_cast<size_t>(PyTuple_GET_SIZE(tuple.get())); }
    PyObject* operator[](size_t i) const { return PyTuple_GET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i)); }
  };

  sw::PartKind kind(PyObject* part) {
    if (PyLong_CheckExact(part) || is_int_part(part)) return sw::PartKind::Int;
    if (PyTuple_Check(part) || PyList_Check(part)) return sw::PartKind::Sequence;
    bad_part(part);
    return sw::PartKind::Bad;
  }

  sw::KeyStatus ordinal(PyObject* part, int64_t limit, int64_t* out) {
    Ref owned;
    if (!PyLong_Check(part)) {
      owned = Ref::steal(PyNumber_Index(part));  // may run Python code
      if (!owned) return sw::KeyStatus::Error;
      part = owned.get();
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(part, &overflow);
    if (v == -1 && PyErr_Occurred()) return sw::KeyStatus::Error;
    if (overflow || v < 0 || v >= limit) return sw::KeyStatus::Outside;
    *out = v;
    return sw::KeyStatus::Ok;
  }

  bool items(PyObject* part, Items* out) {
    out->tuple = Ref::steal(PyList_Check(part) ? PyList_AsTuple(part) : Py_NewRef(part));
    return static_cast<bool>(out->tuple);
  }
};

PyObject* Layout_index(PyObject* self, PyObject* key) {
  int64_t idx;
  if (layout_index_from_key(self, key, &idx) < 0) return nullptr;
  return PyLong_FromLongLong(idx);
}

PyObject* Layout_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* key;
  if (kwargs && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "Layout() call takes no keyword arguments");
    return nullptr;
  }
  if (!PyArg_UnpackTuple(args, "Layout", 1, 1, &key)) return nullptr;
  return Layout_index(self, key);
}

// ---- members

PyObject* Layout_get_shape(PyObject* self, void*) { return Py_XNewRef(layout_shape(self)); }
PyObject* Layout_get_stride(PyObject* self, void*) { return Py_XNewRef(layout_stride(self)); }
PyObject* Layout_get_size(PyObject* self, void*) { return PyLong_FromLongLong(layout_of(self).size()); }
PyObject* Layout_get_cosize(PyObject* self, void*) { return PyLong_FromLongLong(layout_of(self).cosize()); }
PyObject* Layout_get_is_injective(PyObject* self, void*) {
  const int r = layout_is_injective(self);
  return r < 0 ? nullptr : PyBool_FromLong(r);
}

PyObject* Layout_leaves(PyObject* self, PyObject*) {
  const auto& leaves = layout_of(self).leaves();
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(leaves.size())));
  if (!list) return nullptr;
  for (size_t i = 0; i < leaves.size(); ++i) {
    PyObject* t = Py_BuildValue("(LL)", static_cast<long long>(leaves[i].extent),
                                static_cast<long long>(leaves[i].stride));
    if (!t) return nullptr;
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), t);
  }
  return list.release();
}

Py_ssize_t Layout_len(PyObject* self) {
  return static_cast<Py_ssize_t>(layout_of(self).shape().children.size());
}

// Mode i as a Layout: a leaf mode becomes a rank-1 layout.
PyObject* Layout_item(PyObject* self, Py_ssize_t i) {
  const sw::Layout& l = layout_of(self);
  if (i < 0 || i >= static_cast<Py_ssize_t>(l.shape().children.size())) {
    PyErr_SetString(PyExc_IndexError, "Layout index out of range");
    return nullptr;
  }
  return engine_new([&] { return layout_from_engine(sw::mode_layout(l, static_cast<size_t>(i))); });
}

PyObject* Layout_subscript(PyObject* self, PyObject* key) {
  const sw::Layout& l = layout_of(self);
  const auto n_modes = static_cast<Py_ssize_t>(l.shape().children.size());
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return nullptr;
    Py_ssize_t n = PySlice_AdjustIndices(n_modes, &start, &stop, step);
    return engine_new([&] { return layout_from_engine(sw::select_modes(l, start, step, n)); });
  }
  if (PyIndex_Check(key) && !PyBool_Check(key)) {  // bool is no mode number
    Py_ssize_t i = PyNumber_AsSsize_t(key, nullptr);  // clamps huge ints: "out of range"
    if (i == -1 && PyErr_Occurred()) return nullptr;
    if (i < 0) i += n_modes;
    return Layout_item(self, i);
  }
  PyErr_Format(PyExc_TypeError, "Layout indices must be integers or slices, not %.100s", Py_TYPE(key)->tp_name);
  return nullptr;
}

PyObject* Layout_broadcast_to(PyObject* self, PyObject* shape) {
  if (!PyObject_TypeCheck(shape, &Shape_Type)) {
    PyErr_Format(PyExc_TypeError, "broadcast_to() expects a Shape, got %.100s", Py_TYPE(shape)->tp_name);
    return nullptr;
  }
  return engine_new([&]() -> PyObject* {
    sw::Layout b = layout_of(self).broadcast_to(tree_of(shape));
    // The result keeps the given Shape object, like Layout(shape, stride).
    Ref stride = Ref::steal(stride_from_tree(b.stride()));
    if (!stride) return nullptr;
    return layout_alloc(Ref::borrow(shape), std::move(stride), std::move(b));
  });
}

PyObject* Layout_canonical(PyObject*, PyObject* shape) {
  if (!PyObject_TypeCheck(shape, &Shape_Type)) {
    PyErr_Format(PyExc_TypeError, "Layout.canonical() expects a Shape, got %.100s", Py_TYPE(shape)->tp_name);
    return nullptr;
  }
  return engine_new([&]() -> PyObject* {
    sw::Layout c = sw::Layout::canonical(tree_of(shape));
    Ref stride = Ref::steal(stride_from_tree(c.stride()));
    if (!stride) return nullptr;
    return layout_alloc(Ref::borrow(shape), std::move(stride), std::move(c));
  });
}

PyObject* Layout_repr(PyObject* self) {
  PyObject* shape = layout_shape(self);
  PyObject* stride = shape ? layout_stride(self) : nullptr;
  if (!stride) return nullptr;
  return PyUnicode_FromFormat("Layout<%R, %R>", shape, stride);
}

PyObject* Layout_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !is_layout(b)) Py_RETURN_NOTIMPLEMENTED;
  bool eq = layout_of(a) == layout_of(b);
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

int Layout_setattro(PyObject*, PyObject* name, PyObject*) {
  PyErr_Format(PyExc_AttributeError, "Layout is immutable: cannot set or delete attribute %R", name);
  return -1;
}

PyObject* Layout_reduce(PyObject* self, PyObject*) {
  if (layout_of(self).size() == 0) return empty_layout_reduce(self);
  PyObject* shape = layout_shape(self);
  PyObject* stride = shape ? layout_stride(self) : nullptr;
  if (!stride) return nullptr;
  return Py_BuildValue("(O(OO))", reinterpret_cast<PyObject*>(&Layout_Type), shape, stride);
}

PyMethodDef Layout_methods[] = {
    {"leaves", Layout_leaves, METH_NOARGS, "list of (extent, stride) leaf modes, depth-first"},
    {"index", Layout_index, METH_O,
     "index(key): scalar index of a coordinate; key is a flat int ordinal or a tuple/list with one "
     "entry per top-level mode"},
    {"broadcast_to", Layout_broadcast_to, METH_O,
     "broadcast_to(shape): widen extent-1 leaves to shape's extents with stride 0"},
    {"canonical", Layout_canonical, METH_O | METH_STATIC,
     "canonical(shape): compact injective layout, strides = running product of earlier extents"},
    {"__reduce__", Layout_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Layout_getset[] = {
    {"shape", Layout_get_shape, nullptr, "the Shape given to the constructor", nullptr},
    {"stride", Layout_get_stride, nullptr, "the Stride given to the constructor", nullptr},
    {"size", Layout_get_size, nullptr, "number of coordinates (product of extents)", nullptr},
    {"cosize", Layout_get_cosize, nullptr, "1 + greatest index any coordinate reaches", nullptr},
    {"is_injective", Layout_get_is_injective, nullptr, "True when no two coordinates share an index (gaps allowed). Exact without enumerating "
     "huge layouts; only pathological overlapping strides beyond the engine's work budget "
     "report False (not proven injective).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// Only length and item: enough for len() and iteration (sq_item); the
// rest of the table stays zero.
PySequenceMethods Layout_as_sequence = [] {
  PySequenceMethods m{};
  m.sq_length = Layout_len;
  m.sq_item = Layout_item;
  return m;
}();

PyMappingMethods Layout_as_mapping = {
    Layout_len,        /* mp_length */
    Layout_subscript,  /* mp_subscript */
    nullptr,           /* mp_ass_subscript */
};

}  // namespace

PyTypeObject Layout_Type = static_type("strideweave.Layout", sizeof(LayoutObject));

PyObject* layout_from_engine(const sw::Layout& l) {
  return engine_new([&] { return layout_alloc(Ref(), Ref(), l); });
}

PyObject* layout_from_engine(sw::Layout&& l) { return layout_alloc(Ref(), Ref(), std::move(l)); }

PyObject* flat_layout_object(std::span<const sw::LeafMode> leaves) {
  FlatLayoutCache& cache = module_state.flat_layouts;
  // The entry hit last first: a loop importing one producer's arrays asks
  // for the same layout every time.
  const auto matches = [&](const FlatLayoutCache::Entry& e) {
    return e.layout && std::equal(e.leaves.begin(), e.leaves.end(), leaves.begin(), leaves.end());
  };
  if (matches(cache.entries[cache.last_hit])) return Py_NewRef(cache.entries[cache.last_hit].layout);
  for (size_t i = 0; i < FlatLayoutCache::kSize; ++i)
    if (matches(cache.entries[i])) {
      cache.last_hit = i;
      return Py_NewRef(cache.entries[i].layout);
    }
  // A miss: the leaves are this call's own until the entry is written.
  // Making the Layout object allocates, which may run a collection and a
  // finalizer that makes a layout too (and uses the cache) before we get back.
  std::vector<sw::LeafMode> own;
  Ref lo = Ref::steal(engine_new([&] {
    own.assign(leaves.begin(), leaves.end());
    return layout_from_engine(sw::Layout::flat(own));
  }));
  if (!lo) return nullptr;
  // No Python code runs from here until the entry is whole: the replaced
  // Layout is dropped at the return.
  FlatLayoutCache::Entry& slot = cache.entries[cache.next];
  cache.last_hit = cache.next;
  cache.next = (cache.next + 1) % FlatLayoutCache::kSize;
  Ref replaced = Ref::steal(std::exchange(slot.layout, lo.new_ref()));
  slot.leaves = std::move(own);
  return lo.release();
}

PyObject* layout_flat_view(PyObject* source, const sw::LeafMode* leaves, size_t n) {
  LayoutObject* s = as_layout(source);
  if (s->last_view) {
    const std::vector<sw::LeafMode>& have = layout_of(s->last_view).leaves();
    if (std::equal(have.begin(), have.end(), leaves, leaves + n)) return Py_NewRef(s->last_view);
  }
  PyObject* lo =
      engine_new([&] { return layout_from_engine(sw::Layout::flat(std::vector<sw::LeafMode>(leaves, leaves + n))); });
  if (lo) Py_XSETREF(s->last_view, Py_NewRef(lo));
  return lo;
}

int layout_is_injective(PyObject* layout) {
  LayoutObject* o = as_layout(layout);
  if (o->injective == 0 && engine_call([&] { o->injective = o->layout.is_injective() ? 1 : -1; }) < 0) return -1;
  return o->injective > 0 ? 1 : 0;
}

PyObject* layout_shape(PyObject* layout) {
  LayoutObject* o = as_layout(layout);
  if (!o->shape) o->shape = shape_from_tree(o->layout.shape());
  return o->shape;
}

PyObject* layout_stride(PyObject* layout) {
  LayoutObject* o = as_layout(layout);
  if (!o->stride) o->stride = stride_from_tree(o->layout.stride());
  return o->stride;
}

PyObject* layout_shape_or_none(PyObject* layout) {
  if (PyObject* s = as_layout(layout)->shape) return s;
  ErrorGuard keep;
  PyObject* s = layout_shape(layout);
  return s ? s : Py_None;
}

// Hot path (Tensor indexing per element): an int key costs one
// PyLong conversion and the engine's leaf walk, no allocation.
int layout_index_from_key(PyObject* layout, PyObject* key, int64_t* out_index) {
  KeyReader reader;
  const sw::KeyStatus st = sw::key_index(reader, key, layout_of(layout), out_index);
  if (st == sw::KeyStatus::Ok) return 0;
  if (st == sw::KeyStatus::Outside) {
    PyObject* shape = layout_shape(layout);  // built only for the message
    if (shape) PyErr_Format(PyExc_ValueError, "%s: key %R is outside %R", kNotInDomain, key, shape);
  }
  return -1;
}

int key_index(const sw::Layout& l, PyObject* shape_obj, PyObject* key, int64_t* out_index) {
  KeyReader reader;
  const sw::KeyStatus st = sw::key_index(reader, key, l, out_index);
  if (st == sw::KeyStatus::Ok) return 0;
  if (st == sw::KeyStatus::Outside)
    PyErr_Format(PyExc_ValueError, "%s: key %R is outside %R", kNotInDomain, key, shape_obj);
  return -1;
}

int layout_module_init(PyObject* module) {
  Layout_Type.tp_flags = Py_TPFLAGS_DEFAULT;
  Layout_Type.tp_doc =
      "Layout(shape, stride): immutable map from coordinates of a hierarchical Shape to scalar "
      "indices, index = sum of leaf coordinate * leaf stride (first mode fastest). Unhashable.";
  Layout_Type.tp_new = Layout_new;
  Layout_Type.tp_dealloc = Layout_dealloc;
  Layout_Type.tp_repr = Layout_repr;
  Layout_Type.tp_call = Layout_call;
  Layout_Type.tp_richcompare = Layout_richcompare;
  Layout_Type.tp_hash = PyObject_HashNotImplemented;
  Layout_Type.tp_setattro = Layout_setattro;
  Layout_Type.tp_as_sequence = &Layout_as_sequence;
  Layout_Type.tp_as_mapping = &Layout_as_mapping;
  Layout_Type.tp_methods = Layout_methods;
  Layout_Type.tp_getset = Layout_getset;
  return add_type(module, &Layout_Type, "Layout");
}

}  // namespace swpy

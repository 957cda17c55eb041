// Shape and Stride: immutable, hierarchical int trees (API.md section 2).
// Both types share IntTreeObject; they differ in the leaf rule (extent >= 1
// vs stride >= 0), the type name, and Shape's extra `size`.
//
// Parsing rules (decisions where API.md is silent):
//  - Shape(x) with one argument that is not an int is the single-iterable
//    form: x's items are the modes. Otherwise the arguments are the modes.
//  - An int leaf is a Python int (subclasses included) or any object with
//    __index__ that is not iterable (a NumPy integer). bool is rejected with
//    ValueError: True as an extent is almost certainly a bug.
//  - str/bytes/bytearray are never iterables here (ValueError), so "23"
//    cannot silently become a tree of characters.
//  - Nesting deeper than sw::kMaxTreeDepth levels is a ValueError (self-referential
//    lists would otherwise recurse forever).
//  - A Shape whose size overflows int64, or any leaf beyond int64, is a
//    ValueError.
#include <new>
#include <string>

#include "layout_object.hpp"
#include "layout/tree_rules.hpp"
#include "module.hpp"
#include "keys.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"
#include "util/args.hpp"

namespace swpy {

namespace {

using sw::kMaxTreeDepth;

IntTreeObject* as_tree(PyObject* o) { return reinterpret_cast<IntTreeObject*>(o); }
bool is_int_tree(PyObject* o) { return Py_TYPE(o) == &Shape_Type || Py_TYPE(o) == &Stride_Type; }

// New object of type (Shape_Type or Stride_Type) owning a copy of t.
PyObject* tree_object_new(PyTypeObject* type, sw::IntTree t) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  new (&as_tree(self)->tree) sw::IntTree(std::move(t));
  return self;
}

int bad_leaf(sw::TreeKind kind, int64_t v) {
  PyErr_SetString(PyExc_ValueError, sw::leaf_error(kind, v).c_str());
  return -1;
}

// Every leaf of a tree copied from another Shape/Stride.
int check_tree(sw::TreeKind kind, const sw::IntTree& t) {
  const sw::IntTree* bad = sw::first_invalid_leaf(kind, t);
  return bad ? bad_leaf(kind, bad->value) : 0;
}

int too_deep(sw::TreeKind kind) {
  PyErr_Format(PyExc_ValueError, "%s nesting is deeper than %d levels", sw::tree_kind_name(kind), kMaxTreeDepth);
  return -1;
}

int leaf_from_long(sw::TreeKind kind, PyObject* num, sw::IntTree* out) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(num, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    PyErr_Format(PyExc_ValueError, "%s value %R does not fit a signed 64-bit integer", sw::tree_kind_name(kind),
                 num);
    return -1;
  }
  if (!sw::leaf_valid(kind, v)) return bad_leaf(kind, v);
  *out = sw::IntTree::leaf(v);
  return 0;
}

int parse_items(sw::TreeKind kind, PyObject* iterable, int depth, std::vector<sw::IntTree>* out);

// One mode: an int leaf or a nested iterable.
int parse_item(sw::TreeKind kind, PyObject* item, int depth, sw::IntTree* out) {
  if (PyBool_Check(item)) {
    PyErr_Format(PyExc_ValueError, "%s element must be an int or an iterable, got bool", sw::tree_kind_name(kind));
    return -1;
  }
  if (PyLong_Check(item)) return leaf_from_long(kind, item, out);
  if (PyUnicode_Check(item) || PyBytes_Check(item) || PyByteArray_Check(item)) {
    PyErr_Format(PyExc_ValueError, "%s element must be an int or an iterable, got %.100s", sw::tree_kind_name(kind),
                 Py_TYPE(item)->tp_name);
    return -1;
  }
  if (is_int_tree(item)) {
    // The limit holds for nested Shape/Stride objects too, or wrapping them
    // would grow a tree deep enough to overflow the recursive tree code.
    if (sw::nesting_too_deep(depth, tree_of(item))) return too_deep(kind);
    if (check_tree(kind, tree_of(item)) < 0) return -1;
    *out = tree_of(item);
    return 0;
  }
  if (Ref::steal(PyObject_GetIter(item))) {
    std::vector<sw::IntTree> children;
    if (parse_items(kind, item, depth + 1, &children) < 0) return -1;
    *out = sw::IntTree::node(std::move(children));
    return 0;
  }
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
  PyErr_Clear();
  if (PyIndex_Check(item)) {
    if (Ref num = Ref::steal(PyNumber_Index(item))) return leaf_from_long(kind, num.get(), out);
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
  }
  PyErr_Format(PyExc_ValueError, "%s element must be an int or an iterable, got %.100s", sw::tree_kind_name(kind),
               Py_TYPE(item)->tp_name);
  return -1;
}

// The modes of an iterable (each item one mode).
int parse_items(sw::TreeKind kind, PyObject* iterable, int depth, std::vector<sw::IntTree>* out) {
  if (depth > kMaxTreeDepth) return too_deep(kind);
  if (is_int_tree(iterable)) {
    if (check_tree(kind, tree_of(iterable)) < 0) return -1;
    *out = tree_of(iterable).children;
    return 0;
  }
  Ref it = Ref::steal(PyObject_GetIter(iterable));
  if (!it) return -1;
  while (Ref item = Ref::steal(PyIter_Next(it.get()))) {
    sw::IntTree t;
    if (parse_item(kind, item.get(), depth, &t) < 0) return -1;
    out->push_back(std::move(t));
  }
  return PyErr_Occurred() ? -1 : 0;
}

PyObject* IntTree_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  const sw::TreeKind kind = type == &Shape_Type ? sw::TreeKind::Shape : sw::TreeKind::Stride;
  if (kwargs && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", sw::tree_kind_name(kind));
    return nullptr;
  }
  PyObject* source = args;
  if (PyTuple_GET_SIZE(args) == 1) {
    PyObject* only = PyTuple_GET_ITEM(args, 0);
    // A lone non-int argument is the single-iterable form (or invalid,
    // which parse_item reports with the element's type).
    if (!PyLong_Check(only) && !PyUnicode_Check(only) && !PyBytes_Check(only) && !PyByteArray_Check(only)) {
      if (is_int_tree(only)) {
        source = only;
      } else {
        if (Ref::steal(PyObject_GetIter(only))) {
          source = only;
        } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
          PyErr_Clear();  // not iterable: parse it as the single mode
        } else {
          return nullptr;
        }
      }
    }
  }
  return engine_new([&]() -> PyObject* {
    std::vector<sw::IntTree> modes;
    if (parse_items(kind, source, 1, &modes) < 0) return nullptr;
    sw::IntTree t = sw::IntTree::node(std::move(modes));
    if (kind == sw::TreeKind::Shape && sw::size_overflows(t)) {
      PyErr_Format(PyExc_ValueError, "Shape size (product of extents) overflows int64: %s",
                   sw::to_string(t).c_str());
      return nullptr;
    }
    return tree_object_new(type, std::move(t));
  });
}

void IntTree_dealloc(PyObject* self) {
  as_tree(self)->tree.~IntTree();
  Py_TYPE(self)->tp_free(self);
}

PyObject* tree_to_py(const sw::IntTree& t) {
  if (t.is_leaf) return PyLong_FromLongLong(t.value);
  Ref tup = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(t.children.size())));
  if (!tup) return nullptr;
  for (size_t i = 0; i < t.children.size(); ++i) {
    PyObject* c = tree_to_py(t.children[i]);
    if (!c) return nullptr;
    PyTuple_SET_ITEM(tup.get(), static_cast<Py_ssize_t>(i), c);
  }
  return tup.release();
}

// A child mode: int for a leaf, same-type object for a nested mode.
PyObject* mode_to_py(PyObject* self, const sw::IntTree& child) {
  if (child.is_leaf) return PyLong_FromLongLong(child.value);
  return engine_new([&] { return tree_object_new(Py_TYPE(self), child); });
}

Py_ssize_t IntTree_len(PyObject* self) { return static_cast<Py_ssize_t>(tree_of(self).children.size()); }

PyObject* IntTree_item(PyObject* self, Py_ssize_t i) {
  const auto& ch = tree_of(self).children;
  if (i < 0 || i >= static_cast<Py_ssize_t>(ch.size())) {
    PyErr_Format(PyExc_IndexError, "%s index out of range", type_name(self));
    return nullptr;
  }
  return mode_to_py(self, ch[static_cast<size_t>(i)]);
}

PyObject* IntTree_subscript(PyObject* self, PyObject* key) {
  const auto& ch = tree_of(self).children;
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return nullptr;
    Py_ssize_t n = PySlice_AdjustIndices(static_cast<Py_ssize_t>(ch.size()), &start, &stop, step);
    return engine_new([&] { return tree_object_new(Py_TYPE(self), sw::select_modes(tree_of(self), start, step, n)); });
  }
  if (PyIndex_Check(key) && !PyBool_Check(key)) {  // bool is no mode number
    Py_ssize_t i = PyNumber_AsSsize_t(key, nullptr);  // clamps huge ints: "out of range"
    if (i == -1 && PyErr_Occurred()) return nullptr;
    if (i < 0) i += static_cast<Py_ssize_t>(ch.size());
    return IntTree_item(self, i);
  }
  PyErr_Format(PyExc_TypeError, "%s indices must be integers or slices, not %.100s", type_name(self),
               Py_TYPE(key)->tp_name);
  return nullptr;
}

PyObject* IntTree_repr(PyObject* self) {
  return engine_new([&] {
    const std::string s = sw::tree_repr(type_name(self), tree_of(self));
    return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  });
}

PyObject* IntTree_richcompare(PyObject* a, PyObject* b, int op) {
  // Shape and Stride never compare equal to each other or to tuples.
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b)) Py_RETURN_NOTIMPLEMENTED;
  bool eq = tree_of(a) == tree_of(b);
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

int IntTree_setattro(PyObject* self, PyObject* name, PyObject*) {
  PyErr_Format(PyExc_AttributeError, "%s is immutable: cannot set or delete attribute %R", type_name(self),
               name);
  return -1;
}

PyObject* IntTree_get_top_level(PyObject* self, void*) { return tree_to_py(tree_of(self)); }
PyObject* IntTree_get_depth(PyObject* self, void*) { return PyLong_FromLong(tree_of(self).depth()); }
PyObject* Shape_get_size(PyObject* self, void*) {
  return PyLong_FromLongLong(tree_of(self).product());  // validated: no overflow
}

PyObject* IntTree_reduce(PyObject* self, PyObject*) {
  if (Py_TYPE(self) == &Shape_Type && tree_of(self).product() == 0) return empty_shape_reduce(self);
  PyObject* top = tree_to_py(tree_of(self));
  if (!top) return nullptr;
  return Py_BuildValue("(O(N))", reinterpret_cast<PyObject*>(Py_TYPE(self)), top);
}

PyMethodDef IntTree_methods[] = {
    {"__reduce__", IntTree_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

// ---- Shape.encode / Shape.decode: first-mode-fastest ordinals of keys.

PyObject* Shape_encode(PyObject* self, PyObject* key) {
  return engine_new([&]() -> PyObject* {
    // The canonical layout's index of a key is its colexicographic ordinal.
    const sw::Layout canonical = sw::Layout::canonical(tree_of(self));
    int64_t ordinal;
    if (key_index(canonical, self, key, &ordinal) < 0) return nullptr;
    return PyLong_FromLongLong(ordinal);
  });
}

PyObject* Shape_decode(PyObject* self, PyObject* ordinal_obj) {
  if (is_bool(ordinal_obj) || !PyIndex_Check(ordinal_obj)) {
    PyErr_Format(PyExc_TypeError, "Shape.decode() expects an int ordinal, got %.100s", type_name(ordinal_obj));
    return nullptr;
  }
  Ref index = Ref::steal(PyNumber_Index(ordinal_obj));
  if (!index) return nullptr;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.get(), &overflow);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  const sw::IntTree& t = tree_of(self);
  if (overflow || !sw::ordinal_in(t, v)) {
    PyErr_Format(PyExc_ValueError, "Shape.decode(): ordinal %R is outside %R (size %lld)", index.get(), self,
                 static_cast<long long>(t.product()));
    return nullptr;
  }
  return engine_new([&] { return tree_to_py(sw::decode_ordinal(t, v)); });
}

PyMethodDef Shape_methods[] = {
    {"__reduce__", IntTree_reduce, METH_NOARGS, nullptr},
    {"encode", Shape_encode, METH_O,
     "encode(key) -> int: the first-mode-fastest ordinal of a coordinate key (same key forms and errors "
     "as Layout.index)"},
    {"decode", Shape_decode, METH_O,
     "decode(ordinal) -> tuple: the coordinate of an ordinal as a nested tuple mirroring the shape"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Shape_getset[] = {
    {"top_level", IntTree_get_top_level, nullptr, "the modes as a nested tuple of ints", nullptr},
    {"depth", IntTree_get_depth, nullptr, "nesting depth: (2, 3) -> 1, (2, (3, 4)) -> 2", nullptr},
    {"size", Shape_get_size, nullptr, "product of all extents", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyGetSetDef Stride_getset[] = {
    {"top_level", IntTree_get_top_level, nullptr, "the modes as a nested tuple of ints", nullptr},
    {"depth", IntTree_get_depth, nullptr, "nesting depth: (1, 2) -> 1, (1, (2, 6)) -> 2", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// Only length and item: enough for len() and iteration (sq_item); the
// rest of the table stays zero.
PySequenceMethods IntTree_as_sequence = [] {
  PySequenceMethods m{};
  m.sq_length = IntTree_len;
  m.sq_item = IntTree_item;
  return m;
}();

PyMappingMethods IntTree_as_mapping = {
    IntTree_len,        /* mp_length */
    IntTree_subscript,  /* mp_subscript */
    nullptr,            /* mp_ass_subscript */
};

void init_tree_type(PyTypeObject* t, const char* doc, PyGetSetDef* getset) {
  t->tp_flags = Py_TPFLAGS_DEFAULT;
  t->tp_doc = doc;
  t->tp_new = IntTree_new;
  t->tp_dealloc = IntTree_dealloc;
  t->tp_repr = IntTree_repr;
  t->tp_richcompare = IntTree_richcompare;
  t->tp_hash = PyObject_HashNotImplemented;
  t->tp_setattro = IntTree_setattro;
  t->tp_as_sequence = &IntTree_as_sequence;
  t->tp_as_mapping = &IntTree_as_mapping;
  t->tp_methods = IntTree_methods;
  t->tp_getset = getset;
}

}  // namespace

PyTypeObject Shape_Type = static_type("strideweave.Shape", sizeof(IntTreeObject));

PyTypeObject Stride_Type = static_type("strideweave.Stride", sizeof(IntTreeObject));

PyObject* shape_from_tree(const sw::IntTree& t) {
  return engine_new([&] { return tree_object_new(&Shape_Type, t); });
}

PyObject* stride_from_tree(const sw::IntTree& t) {
  return engine_new([&] { return tree_object_new(&Stride_Type, t); });
}

int shape_module_init(PyObject* module) {
  init_tree_type(&Shape_Type,
                 "Shape(*items): immutable hierarchical extents. An int item is a leaf mode, a nested "
                 "iterable a nested mode; Shape(2, [3, 4]) == Shape([2, [3, 4]]). Extents are >= 1; bool, "
                 "str and other non-int, non-iterable items raise ValueError. Unhashable.",
                 Shape_getset);
  Shape_Type.tp_methods = Shape_methods;
  init_tree_type(&Stride_Type,
                 "Stride(*items): immutable hierarchical strides, congruent to a Shape in a Layout. "
                 "Same construction rules as Shape with values >= 0. Unhashable.",
                 Stride_getset);
  if (add_type(module, &Shape_Type, "Shape") < 0) return -1;
  if (add_type(module, &Stride_Type, "Stride") < 0) return -1;
  return 0;
}

}  // namespace swpy

// Tensor indexing and the NumPy-style sequence surface: t[key] (an element or
// a view), Tensor.shape, ndim, len() and iteration over mode 0.
//
// Which key is which:
//  - An int (or any __index__ object but bool) is the flat first-mode-fastest
//    ordinal of one element (API.md's CuTe rule), and a tuple/list of ints and
//    nested int tuples/lists is an element's coordinate, as Layout.index
//    takes them: t[i] and t[i, j] read and write elements.
//  - A key holding a slice, `...` or None anywhere is a view key: NumPy's
//    basic indexing over the top-level modes (the engine's slice_layout). It
//    returns a Tensor over the same carrier (no copy; shared version), with
//    NumPy's rules for its int parts (negatives count from the end, an index
//    outside the mode is IndexError).
// Decisions where API.md is silent: a view of a released carrier is refused
// (RuntimeError "released"), as reading it would be; a negative step is
// ValueError (layout strides are non-negative) and so is an empty range (a
// Shape has no zero extent); iterating yields t[i, ...] views, rank-0 ones
// for a rank-1 tensor (as torch does), never element values.
#include <new>
#include <span>
#include <string>
#include <vector>

#include "layout/slice.hpp"
#include "layout/keys.hpp"
#include "layout/tree_rules.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/args.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

using sw::SlicePart;

// An int part: an int or an __index__ scalar (a NumPy integer), not bool
// and not an array (an ndarray has __index__ too: advanced indexing).
bool is_int_part(PyObject* o) {
  if (PyLong_CheckExact(o)) return true;
  if (is_bool(o) || PyTuple_Check(o) || PyList_Check(o)) return false;
  return PyLong_Check(o) || (PyIndex_Check(o) && !PySequence_Check(o));
}

// Whether key holds a slice, an Ellipsis or None (at any depth).
int holds_view_part(PyObject* key, int depth) {
  if (PySlice_Check(key) || key == Py_Ellipsis || key == Py_None) return 1;
  if (!PyTuple_Check(key) && !PyList_Check(key)) return 0;
  if (depth > sw::kMaxTreeDepth) return 0;  // the element path reports it
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(key);
  for (Py_ssize_t i = 0; i < n; ++i) {
    // Lists may change under user code only during conversion, not here.
    if (holds_view_part(PySequence_Fast_GET_ITEM(key, i), depth + 1)) return 1;
  }
  return 0;
}

int bad_part(PyObject* part) {
  if (is_bool(part))
    PyErr_SetString(PyExc_TypeError, "Tensor index parts cannot be bool (an int, a slice, ..., None or a tuple)");
  else
    PyErr_Format(PyExc_TypeError,
                 "Tensor index part must be an int, a slice, ... (Ellipsis), None or a tuple/list of those, not "
                 "%.100s (advanced indexing with arrays or tensors is not supported)",
                 Py_TYPE(part)->tp_name);
  return -1;
}

int parse_part(PyObject* part, int depth, SlicePart* out);
int parse_parts(PyObject* seq, int depth, std::vector<SlicePart>* out);

// The parts of a key: a few inline, constructed only as needed (no
// allocation, no zeroing of unused parts on the indexing path).
class KeyParts {
 public:
  static constexpr size_t kInline = 8;
  KeyParts() = default;
  KeyParts(const KeyParts&) = delete;
  KeyParts& operator=(const KeyParts&) = delete;
  ~KeyParts() {
    for (size_t i = 0; i < built_; ++i) inline_parts()[i].~SlicePart();
  }
  // Sizes the key once, to count default parts.
  SlicePart* resize(size_t count) {
    n_ = count;
    if (count > kInline) {
      heap_.resize(count);
      return heap_.data();
    }
    for (; built_ < count; ++built_) new (&inline_parts()[built_]) SlicePart();
    return inline_parts();
  }
  std::span<const SlicePart> span() const { return {n_ <= kInline ? inline_parts() : heap_.data(), n_}; }

 private:
  SlicePart* inline_parts() { return std::launder(reinterpret_cast<SlicePart*>(storage_)); }
  const SlicePart* inline_parts() const { return std::launder(reinterpret_cast<const SlicePart*>(storage_)); }

  alignas(SlicePart) unsigned char storage_[kInline * sizeof(SlicePart)];
  size_t built_ = 0;
  size_t n_ = 0;
  std::vector<SlicePart> heap_;
};

// The items of a tuple/list part into count parts at out (a list is copied:
// __index__ may run code that changes it).
template <class Resize>
int parse_items(PyObject* seq, int depth, Resize resize) {
  if (depth > sw::kMaxTreeDepth) {
    PyErr_SetString(PyExc_ValueError, "Tensor index is nested too deeply");
    return -1;
  }
  Ref items = Ref::steal(PyList_Check(seq) ? PyList_AsTuple(seq) : Py_NewRef(seq));
  if (!items) return -1;
  const Py_ssize_t n = PyTuple_GET_SIZE(items.get());
  SlicePart* out = resize(static_cast<size_t>(n));
  if (!out) return -1;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (parse_part(PyTuple_GET_ITEM(items.get(), i), depth, &out[i]) < 0) return -1;
  return 0;
}

int parse_parts(PyObject* seq, int depth, std::vector<SlicePart>* out) {
  return parse_items(seq, depth, [out](size_t n) -> SlicePart* {
    return engine_call([&] { out->resize(n); }) < 0 ? nullptr : out->data();
  });
}

int parse_key(PyObject* key, KeyParts* out) {
  if (!PyTuple_Check(key) && !PyList_Check(key)) return parse_part(key, 0, out->resize(1));
  return parse_items(key, 0, [out](size_t n) -> SlicePart* {
    SlicePart* parts = nullptr;
    return engine_call([&] { parts = out->resize(n); }) < 0 ? nullptr : parts;
  });
}

int parse_part(PyObject* part, int depth, SlicePart* out) {
  if (PySlice_Check(part)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(part, &start, &stop, &step) < 0) return -1;  // step 0: ValueError
    out->kind = SlicePart::Kind::Range;
    out->start = start == PY_SSIZE_T_MIN ? INT64_MIN : start;
    out->stop = stop == PY_SSIZE_T_MAX ? INT64_MAX : stop;
    out->step = step;
    return 0;
  }
  if (part == Py_Ellipsis) {
    out->kind = SlicePart::Kind::Ellipsis;
    return 0;
  }
  if (part == Py_None) {
    out->kind = SlicePart::Kind::NewAxis;
    return 0;
  }
  if (is_int_part(part)) {
    Py_ssize_t i = PyNumber_AsSsize_t(part, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return -1;
    out->kind = SlicePart::Kind::Index;
    out->index = i;
    return 0;
  }
  if (PyTuple_Check(part) || PyList_Check(part)) {
    out->kind = SlicePart::Kind::Nested;
    return parse_parts(part, depth + 1, &out->nested);
  }
  return bad_part(part);
}

// The sub-tree of the top-level modes at path (for messages).
const sw::IntTree* mode_at(const sw::IntTree& root, const std::vector<size_t>& path) {
  const sw::IntTree* t = &root;
  for (size_t i : path) {
    if (t->is_leaf || i >= t->children.size()) return nullptr;
    t = &t->children[i];
  }
  return t;
}

std::string path_text(const std::vector<size_t>& path) {
  if (path.size() == 1) return std::to_string(path[0]);
  std::string s = "(";
  for (size_t k = 0; k < path.size(); ++k) s += (k ? ", " : "") + std::to_string(path[k]);
  return s + ")";
}

int raise_slice_error(PyObject* self, PyObject* key, const sw::SliceError& e) {
  const sw::IntTree& shape = layout_of(as_tensor(self)->layout).shape();
  const std::string shape_s = sw::to_string(shape);
  const sw::IntTree* m = mode_at(shape, e.mode);
  const std::string mode_s = m ? sw::to_string(*m) : "?";
  const std::string where = path_text(e.mode);
  switch (e.status) {
    case sw::SliceStatus::TooManyParts:
      PyErr_Format(PyExc_IndexError, "too many indices for a tensor of shape %s: the key %R addresses %lld modes, "
                   "the tensor has %lld", shape_s.c_str(), key, static_cast<long long>(e.value),
                   static_cast<long long>(e.extent));
      break;
    case sw::SliceStatus::TwoEllipses:
      PyErr_Format(PyExc_IndexError, "an index can only have a single ellipsis ('...'), got %R", key);
      break;
    case sw::SliceStatus::IndexOutOfRange:
      PyErr_Format(PyExc_IndexError, "index %lld is out of range for mode %s of size %lld (tensor shape %s)",
                   static_cast<long long>(e.value), where.c_str(), static_cast<long long>(e.extent), shape_s.c_str());
      break;
    case sw::SliceStatus::StepNotPositive:
      PyErr_Format(PyExc_ValueError,
                   "slice step must be positive, got %lld in %R: a Layout's strides are non-negative, so a "
                   "reversed view cannot be expressed",
                   static_cast<long long>(e.value), key);
      break;
    case sw::SliceStatus::Empty:
      PyErr_Format(PyExc_ValueError,
                   "the slice for mode %s (size %lld) in %R selects no element; a view needs at least one "
                   "(a Shape has no zero extent)",
                   where.c_str(), static_cast<long long>(e.value), key);
      break;
    case sw::SliceStatus::Inexpressible:
      PyErr_Format(PyExc_TypeError,
                   "the range %lld:%lld in %R on the hierarchical mode %s %s (tensor shape %s) cannot be "
                   "expressed by a layout: the offsets it selects are not evenly spaced (a range on a "
                   "hierarchical mode must select evenly spaced offsets, or stay inside one run of its fastest "
                   "leaf, or take whole runs of it); use ':' to keep the mode, or index its sub-modes with a "
                   "nested tuple",
                   static_cast<long long>(e.value), static_cast<long long>(e.extent), key, where.c_str(),
                   mode_s.c_str(), shape_s.c_str());
      break;
    case sw::SliceStatus::Decreasing:
      PyErr_Format(PyExc_TypeError,
                   "the range %lld:%lld in %R on the hierarchical mode %s %s (tensor shape %s) cannot be "
                   "expressed by a layout: the offsets it selects are evenly spaced but decrease (by %lld), and a "
                   "Layout's strides are non-negative; use ':' to keep the mode, or index its sub-modes with a "
                   "nested tuple",
                   static_cast<long long>(e.value), static_cast<long long>(e.extent), key, where.c_str(),
                   mode_s.c_str(), shape_s.c_str(), static_cast<long long>(-e.spacing));
      break;
    case sw::SliceStatus::NestedOnLeaf:
      PyErr_Format(PyExc_TypeError, "the tuple part of %R for mode %s addresses sub-modes, but that mode is a leaf "
                   "(tensor shape %s)", key, where.c_str(), shape_s.c_str());
      break;
    case sw::SliceStatus::NestedArity:
      PyErr_Format(PyExc_IndexError, "the tuple part of %R for mode %s %s has %lld entries, the mode has %lld "
                   "sub-modes", key, where.c_str(), mode_s.c_str(), static_cast<long long>(e.value),
                   static_cast<long long>(e.extent));
      break;
    default:
      PyErr_Format(PyExc_TypeError, "... and None may appear only at the top level of a Tensor index, not in %R",
                   key);
      break;
  }
  return -1;
}

// ------------------------------------------------------------ iteration

struct TensorIterObject {
  PyObject_HEAD
  PyObject* tensor;  // NULL once exhausted
  Py_ssize_t next;
  Py_ssize_t count;
};

PyTypeObject TensorIter_Type = static_type("strideweave._TensorIterator", sizeof(TensorIterObject));

void TensorIter_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(reinterpret_cast<TensorIterObject*>(self)->tensor);
  PyObject_GC_Del(self);
}

int TensorIter_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<TensorIterObject*>(self)->tensor);
  return 0;
}

PyObject* TensorIter_next(PyObject* self) {
  TensorIterObject* it = reinterpret_cast<TensorIterObject*>(self);
  if (!it->tensor) return nullptr;
  if (it->next >= it->count) {
    Py_CLEAR(it->tensor);
    return nullptr;
  }
  const SlicePart part = SlicePart::at(it->next++);
  Ref tensor = Ref::borrow(it->tensor);  // the view may run code that clears the iterator
  return tensor_view(tensor.get(), {&part, 1}, nullptr);
}

int64_t rank_of(PyObject* self) {
  return static_cast<int64_t>(layout_of(as_tensor(self)->layout).shape().children.size());
}

int64_t mode0_size(PyObject* self) { return sw::mode_size(layout_of(as_tensor(self)->layout).shape().children[0]); }

}  // namespace

PyObject* tensor_view_unrecorded(PyObject* self, std::span<const SlicePart> key, PyObject* key_obj) {
  if (tensor_reject_multi(self, "indexing") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  sw::SliceError e;
  // The common flat case first: no tree is built, and the Layout object of
  // the previous view of this layout is reused when the modes are the same.
  sw::FlatSlice flat;
  sw::SliceStatus st = sw::SliceStatus::Ok;
  if (engine_call([&] { st = sw::slice_flat(layout_of(t->layout), key, &flat, &e); }) < 0) return nullptr;
  const bool was_flat = st != sw::SliceStatus::NotFlat;
  sw::SliceResult r;
  if (!was_flat && engine_call([&] { st = sw::slice_layout(layout_of(t->layout), key, &r, &e); }) < 0)
    return nullptr;
  if (st != sw::SliceStatus::Ok) {
    raise_slice_error(self, key_obj ? key_obj : Py_None, e);
    return nullptr;
  }
  if (as_carrier(t->carrier)->released) {
    PyErr_Format(PyExc_RuntimeError, "cannot view a tensor whose %s carrier is released", type_name(t->carrier));
    return nullptr;
  }
  Ref lo = Ref::steal(was_flat ? layout_flat_view(t->layout, flat.leaves, flat.n)
                               : layout_from_engine(std::move(r.layout)));
  if (!lo) return nullptr;
  const int64_t delta = was_flat ? flat.offset : r.offset;
  return tensor_alloc_view(self, t->offset + static_cast<Py_ssize_t>(delta), lo.get());
}

PyObject* tensor_view(PyObject* self, std::span<const SlicePart> key, PyObject* key_obj) {
  if (grad_enabled() && dtype_is_differentiable(as_tensor(self)->dtype)) return view_forward(self, key, key_obj);
  return tensor_view_unrecorded(self, key, key_obj);
}

int tensor_parse_view_key(PyObject* key, std::vector<SlicePart>* out) {
  if (PyTuple_Check(key) || PyList_Check(key)) return parse_parts(key, 0, out);
  out->resize(1);
  return parse_part(key, 0, &(*out)[0]);
}

PyObject* tensor_getitem(PyObject* self, PyObject* key) {
  if (!is_int_part(key) && holds_view_part(key, 0)) {
    KeyParts parts;
    if (parse_key(key, &parts) < 0) return nullptr;
    return tensor_view(self, parts.span(), key);
  }
  if (tensor_reject_multi(self, "indexing") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  int64_t idx;
  if (layout_index_from_key(t->layout, key, &idx) < 0) return nullptr;
  return carrier_get(t->carrier, t->offset + static_cast<Py_ssize_t>(idx));
}

int tensor_setitem(PyObject* self, PyObject* key, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_TypeError, "Tensor elements cannot be deleted");
    return -1;
  }
  if (!is_int_part(key) && holds_view_part(key, 0)) {
    PyErr_Format(PyExc_TypeError,
                 "assigning to a slice (t[%R] = ...) is not supported; take the view v = t[...] and write its "
                 "elements (v[i] = x), which go to the same carrier",
                 key);
    return -1;
  }
  if (tensor_reject_multi(self, "indexing") < 0) return -1;
  TensorObject* t = as_tensor(self);
  int64_t idx;
  if (layout_index_from_key(t->layout, key, &idx) < 0) return -1;
  return carrier_set(t->carrier, t->offset + static_cast<Py_ssize_t>(idx), value);
}

PyObject* tensor_get_shape(PyObject* self, void*) {
  const std::vector<sw::IntTree>& modes = layout_of(as_tensor(self)->layout).shape().children;
  Ref tup = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(modes.size())));
  if (!tup) return nullptr;
  for (size_t i = 0; i < modes.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(sw::mode_size(modes[i]));
    if (!v) return nullptr;
    PyTuple_SET_ITEM(tup.get(), static_cast<Py_ssize_t>(i), v);
  }
  return tup.release();
}

PyObject* tensor_get_ndim(PyObject* self, void*) { return PyLong_FromLongLong(rank_of(self)); }

Py_ssize_t tensor_len(PyObject* self) {
  if (rank_of(self) == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a rank-0 tensor (it has no mode 0; use item())");
    return -1;
  }
  return static_cast<Py_ssize_t>(mode0_size(self));
}

PyObject* tensor_iter(PyObject* self) {
  if (rank_of(self) == 0) {
    PyErr_SetString(PyExc_TypeError, "iteration over a rank-0 tensor (use item())");
    return nullptr;
  }
  if (tensor_reject_multi(self, "iteration") < 0) return nullptr;
  TensorIterObject* it = PyObject_GC_New(TensorIterObject, &TensorIter_Type);
  if (!it) return nullptr;
  it->tensor = Py_NewRef(self);
  it->next = 0;
  it->count = static_cast<Py_ssize_t>(mode0_size(self));
  PyObject_GC_Track(reinterpret_cast<PyObject*>(it));
  return reinterpret_cast<PyObject*>(it);
}

int tensor_index_module_init(PyObject*) {
  TensorIter_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  TensorIter_Type.tp_doc = "Iterator over mode 0 of a Tensor: yields t[i, ...] views.";
  TensorIter_Type.tp_dealloc = TensorIter_dealloc;
  TensorIter_Type.tp_traverse = TensorIter_traverse;
  TensorIter_Type.tp_iter = PyObject_SelfIter;
  TensorIter_Type.tp_iternext = TensorIter_next;
  return PyType_Ready(&TensorIter_Type);
}

}  // namespace swpy

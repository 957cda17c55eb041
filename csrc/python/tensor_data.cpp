// strideweave.tensor(data, *, dtype=None, layout=None) and the way out:
// Tensor.tolist(), Tensor.item(), Tensor.__array__() (API.md section 11).
//
// tensor() copies into fresh CPU storage. A buffer (NumPy arrays of any
// strides, memoryview, array.array) is converted natively by the engine
// (sw::convert_strided: a memcpy for matching contiguous data, else one
// strided loop, with the GIL released for large inputs). Nested sequences
// are walked once to find their shape and hold their leaves, then each leaf
// is converted with the slot-write rules. Every check (format, shape, dtype,
// layout) runs before the storage is allocated; an Int32 range failure found
// while converting drops the fresh carrier, so a failure leaves nothing.
//
// Decisions where API.md is silent:
//  - bytes/bytearray are buffers of unsigned bytes (Int32); str is rejected.
//  - A nested sequence infers the widest kind of its leaves (bool < int <
//    float); converting then follows the slot rules, so mixing bools with
//    numbers raises TypeError, as writing True into a Float32 slot does.
//  - A given layout must be injective (each element needs its own slot).
//  - Zero extents are rejected (ValueError), as Shape rejects them.
#include "tensor_data.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "data/convert.hpp"
#include "data/shape.hpp"
#include "dtype/info.hpp"
#include "tensor/subtensor_rules.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"
#include "util/args.hpp"

namespace swpy {

namespace {

using sw::data::kMaxRank;
using sw::data::position_text;
using sw::data::shape_text;
// Conversions above this many elements release the GIL.
constexpr int64_t kGilFreeElements = 1 << 16;

// dtype= argument: None (infer) or a DType CPU can hold. 0 / -1; *given is
// false for None.
int parse_dtype(PyObject* dtype, bool* given, sw::DTypeCode* out) {
  *given = false;
  if (!dtype || dtype == Py_None) return 0;
  const int r = dtype_resolve(dtype, &dtype);
  if (r < 0) return -1;
  if (r == 0) {
    PyErr_Format(PyExc_TypeError, "tensor() dtype must be a DType (or a NumPy dtype) or None, not %.100s",
                 type_name(dtype));
    return -1;
  }
  const sw::DTypeCode c = dtype_code(dtype);
  if (c != sw::DTypeCode::Float32 && c != sw::DTypeCode::Int32 && c != sw::DTypeCode::Bool) {
    PyErr_Format(PyExc_ValueError,
                 "tensor() creates CPU storage, which cannot hold dtype %R; use DType.Float32, DType.Int32 or "
                 "DType.Bool",
                 dtype);
    return -1;
  }
  *given = true;
  *out = c;
  return 0;
}

// The layout the tensor gets (a given one, type-checked by the caller, or
// row-major) and where each element goes.
struct Placement : sw::data::Placement {
  Ref layout;  // Layout object
};

int place(PyObject* layout_arg, const std::vector<int64_t>& shape, Placement* p) {
  if (layout_arg && layout_arg != Py_None) {
    const sw::Layout& l = layout_of(layout_arg);
    sw::data::LayoutFit fit = sw::data::LayoutFit::Ok;
    if (engine_call([&] { fit = sw::data::fit_layout(l, shape, p); }) < 0) return -1;
    if (fit == sw::data::LayoutFit::ExtentsDiffer) {
      PyErr_Format(PyExc_ValueError,
                   "tensor() layout %R has leaf extents %s, but the data has shape %s (they must be equal)",
                   layout_arg, shape_text(sw::data::leaf_extents(l)).c_str(), shape_text(shape).c_str());
      return -1;
    }
    if (fit == sw::data::LayoutFit::NotInjective) {
      PyErr_Format(PyExc_ValueError, "tensor() layout %R is not injective: every element needs its own slot",
                   layout_arg);
      return -1;
    }
    p->layout = Ref::borrow(layout_arg);
    return 0;
  }
  sw::Layout l;
  if (engine_call([&] { l = sw::data::row_major(shape, p); }) < 0) return -1;
  p->layout = Ref::steal(layout_from_engine(l));
  return p->layout ? 0 : -1;
}

// Fresh CPU carrier for the placement; *data receives its host pointer.
Ref allocate(const Placement& p, sw::DTypeCode code, void** data) {
  Ref c = Ref::steal(cpu_new(static_cast<Py_ssize_t>(p.cosize), code, true, /*empty=*/p.compact));
  // An empty tensor's storage has no slot to write (and may have no memory).
  if (c && p.cosize > 0 && !(*data = carrier_host_data(c.get()))) {
    PyErr_SetString(PyExc_RuntimeError, "tensor(): fresh CPU storage has no host memory");
    c.reset();
  }
  return c;
}

PyObject* finish(Ref carrier, const Placement& p) {
  return tensor_new(carrier.get(), 0, p.layout.get());
}

// ---------------------------------------------------------------- buffers

PyObject* from_buffer(PyObject* data, bool dtype_given, sw::DTypeCode code, PyObject* layout_arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_RECORDS_RO) < 0) return nullptr;
  struct Releaser {
    Py_buffer* v;
    ~Releaser() { PyBuffer_Release(v); }
  } releaser{&view};

  const char* format = view.format ? view.format : "B";
  sw::ScalarFormat fmt;
  if (!sw::parse_buffer_format(format, &fmt) || fmt.itemsize != view.itemsize) {
    const bool complex = std::strchr(format, 'Z') != nullptr;
    PyErr_Format(PyExc_TypeError,
                 "tensor() cannot convert buffer format '%s'%s: supported are bool, signed and unsigned "
                 "integers and float16/32/64",
                 format, complex ? " (complex)" : "");
    return nullptr;
  }
  if (view.ndim > kMaxRank) {
    PyErr_Format(PyExc_ValueError, "tensor() supports at most %d dimensions, the buffer has %d", kMaxRank,
                 view.ndim);
    return nullptr;
  }
  std::vector<int64_t> shape(static_cast<size_t>(view.ndim)), strides(static_cast<size_t>(view.ndim));
  for (int k = 0; k < view.ndim; ++k) {
    shape[k] = view.shape ? view.shape[k] : view.len / view.itemsize;
    strides[k] = view.strides ? view.strides[k] : view.itemsize;  // 1-d without strides
  }
  if (!dtype_given) code = sw::inferred_dtype(fmt.kind);
  if (!sw::kind_accepted(fmt.kind, code)) {
    PyErr_Format(PyExc_TypeError, "tensor() cannot store %s data (buffer format '%s') in %s slots",
                 sw::data::kind_text(fmt.kind), format, sw::dtype_name(code));
    return nullptr;
  }
  Placement p;
  if (place(layout_arg, shape, &p) < 0) return nullptr;
  void* dst = nullptr;
  Ref carrier = allocate(p, code, &dst);
  if (!carrier) return nullptr;
  const int64_t n = sw::data::element_count(shape);
  if (n == 0) return finish(std::move(carrier), p);  // an empty buffer: nothing to read
  sw::ConvertStatus st;
  auto run = [&] {
    // Large data is converted on several threads (the pool's workers help).
    st = sw::convert_strided_parallel(dst, code, p.strides.data(), view.buf, fmt, strides.data(), shape.data(),
                                      view.ndim);
  };
  if (n >= kGilFreeElements) {
    GilRelease nogil;
    run();
  } else {
    run();
  }
  if (st.error != sw::ConvertError::None) {
    PyErr_Format(PyExc_OverflowError, "value out of range for %s at index %s of data with shape %s%s",
                 sw::dtype_name(code), position_text(shape, st.ordinal).c_str(), shape_text(shape).c_str(),
                 code == sw::DTypeCode::Float32 ? " (a finite value beyond +-3.4028235e+38)" : "");
    return nullptr;  // the fresh carrier is dropped with `carrier`
  }
  return finish(std::move(carrier), p);
}

// ------------------------------------------------------ nested sequences

using sw::data::LeafKind;
using Step = sw::data::NestedShape::Step;

bool is_numpy_bool(PyObject* v) { return is_bool(v) && !PyBool_Check(v); }

// A nested level: a sequence that is not text (str, bytes) or a mapping.
bool is_level(PyObject* o) {
  if (PyList_Check(o) || PyTuple_Check(o)) return true;
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyDict_Check(o)) return false;
  return PySequence_Check(o);
}

struct Nested {
  sw::data::NestedShape shape;
  std::vector<Ref> leaves;  // strong: converting may run code that mutates lists
};

int ragged(const Nested& n, Step step, int64_t len = 0) {
  PyErr_Format(PyExc_ValueError, "tensor() needs a rectangular nested sequence: %s",
               n.shape.ragged_text(step, len).c_str());
  return -1;
}

int walk(PyObject* o, Nested& n) {
  if (!is_level(o)) {
    const Step step = n.shape.leaf();
    if (step != Step::Ok) return ragged(n, step);
    n.leaves.push_back(Ref::borrow(o));
    return 0;
  }
  const Step begin = n.shape.begin_level();
  if (begin == Step::TooDeep) {
    PyErr_Format(PyExc_ValueError, "tensor() supports at most %d dimensions", kMaxRank);
    return -1;
  }
  if (begin != Step::Ok) return ragged(n, begin);
  if (Py_EnterRecursiveCall(" in strideweave.tensor()")) return -1;
  Ref fast = Ref::steal(PySequence_Fast(o, "tensor() data must be a sequence"));
  int rc = -1;
  if (fast) {
    const Py_ssize_t len = PySequence_Fast_GET_SIZE(fast.get());
    const Step step = n.shape.level_length(len);
    if (step != Step::Ok) {
      Py_LeaveRecursiveCall();
      return step == Step::ZeroExtent ? 0 : ragged(n, step, len);  // an empty level holds nothing to walk
    }
    rc = 0;
    // A list may shrink while we walk it (a __len__ or PySequence_Fast of a
    // nested user sequence runs Python code): re-read the size every step.
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
      Ref item = Ref::borrow(PySequence_Fast_GET_ITEM(fast.get(), i));
      n.shape.enter(i);
      rc = walk(item.get(), n);
      n.shape.leave();
    }
    if (rc == 0 && PySequence_Fast_GET_SIZE(fast.get()) != len) {
      PyErr_SetString(PyExc_RuntimeError, "tensor() data changed size while it was read");
      rc = -1;
    }
  }
  Py_LeaveRecursiveCall();
  return rc;
}

int leaf_kind(PyObject* v, LeafKind* out) {
  if (PyBool_Check(v) || is_numpy_bool(v)) *out = LeafKind::Bool;
  else if (PyFloat_Check(v)) *out = LeafKind::Float;
  else if (PyLong_Check(v) || PyIndex_Check(v)) *out = LeafKind::Int;
  else if (PyComplex_Check(v)) {
    PyErr_SetString(PyExc_TypeError, "tensor() cannot store complex numbers");
    return -1;
  } else if (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float) *out = LeafKind::Float;
  else {
    PyErr_Format(PyExc_TypeError, "tensor() data must hold numbers or bools, not %.100s", type_name(v));
    return -1;
  }
  return 0;
}

int store_leaf(PyObject* v, sw::DTypeCode code, void* dst, int64_t slot) {
  switch (code) {
    case sw::DTypeCode::Float32: return value_to_f32(v, static_cast<float*>(dst) + slot);
    case sw::DTypeCode::Int32: return value_to_i32(v, static_cast<int32_t*>(dst) + slot);
    default: {
      bool b;
      if (is_numpy_bool(v)) {
        int t = PyObject_IsTrue(v);
        if (t < 0) return -1;
        b = t != 0;
      } else if (value_to_bool(v, &b) < 0) {
        return -1;
      }
      static_cast<uint8_t*>(dst)[slot] = b ? 1 : 0;
      return 0;
    }
  }
}

// Adds the element's position to the pending exception, raised while
// converting it: in the message of the library's own errors, as a note on
// anything a leaf's __float__/__index__ raised (see locate_error).
void annotate(const std::vector<int64_t>& shape, int64_t ordinal) {
  const std::string at = "at index " + position_text(shape, ordinal) + " of data with shape " + shape_text(shape);
  locate_error("", (" (" + at + ")").c_str(), at.c_str());
}

PyObject* from_values(PyObject* data, bool scalar, bool dtype_given, sw::DTypeCode code, PyObject* layout_arg) {
  Nested n;
  if (scalar) {
    n.leaves.push_back(Ref::borrow(data));
  } else if (walk(data, n) < 0) {
    return nullptr;
  }
  const std::vector<int64_t>& shape = n.shape.shape();
  // No leaf to infer from (tensor([]), an extent 0): Float32, as NumPy's
  // float64 default becomes here.
  LeafKind widest = n.leaves.empty() ? LeafKind::Float : LeafKind::Bool;
  for (size_t i = 0; i < n.leaves.size(); ++i) {
    LeafKind k;
    if (leaf_kind(n.leaves[i].get(), &k) < 0) {
      if (!scalar) annotate(shape, static_cast<int64_t>(i));
      return nullptr;
    }
    if (k > widest) widest = k;
  }
  if (!dtype_given) code = sw::data::inferred_dtype(widest);
  Placement p;
  if (place(layout_arg, shape, &p) < 0) return nullptr;
  void* dst = nullptr;
  Ref carrier = allocate(p, code, &dst);
  if (!carrier) return nullptr;
  sw::data::RowMajorSlots slots(shape, p.strides);
  for (size_t i = 0; i < n.leaves.size(); ++i, slots.next()) {
    // A leaf's __float__/__index__ runs Python code, but nothing else holds
    // this fresh carrier, so its storage cannot go away meanwhile.
    if (store_leaf(n.leaves[i].get(), code, dst, slots.slot()) < 0) {
      if (!scalar) annotate(shape, static_cast<int64_t>(i));
      return nullptr;
    }
  }
  return finish(std::move(carrier), p);
}

bool is_python_number(PyObject* o) {
  return PyFloat_Check(o) || PyLong_Check(o) || PyComplex_Check(o) || is_numpy_bool(o);
}

// Other number-likes (__index__ or __float__), tried after __array__: a
// torch tensor has both and must go through its array.
bool is_number_like(PyObject* o) {
  return !is_level(o) && (PyIndex_Check(o) || (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float));
}

PyObject* tensor_from_data(PyObject* data, PyObject* dtype, PyObject* layout) {
  bool dtype_given;
  sw::DTypeCode code = sw::DTypeCode::Float32;
  if (parse_dtype(dtype, &dtype_given, &code) < 0) return nullptr;
  if (layout && layout != Py_None && !is_layout(layout)) {
    PyErr_Format(PyExc_TypeError, "tensor() layout must be a Layout or None, not %.100s", type_name(layout));
    return nullptr;
  }
  if (PyObject_CheckBuffer(data)) return from_buffer(data, dtype_given, code, layout);
  if (is_python_number(data)) return from_values(data, true, dtype_given, code, layout);
  if (!PyUnicode_Check(data) && !is_tensor(data)) {
    // __array__ (NumPy's protocol; torch tensors, pandas, ...): NumPy is
    // imported by that call only, never by us.
    Ref method = Ref::steal(PyObject_GetAttrString(data, "__array__"));
    if (method) {
      Ref arr = Ref::steal(PyObject_CallNoArgs(method.get()));
      if (!arr) return nullptr;
      if (!PyObject_CheckBuffer(arr.get())) {
        PyErr_Format(PyExc_TypeError, "tensor(): %.100s.__array__() returned %.100s, which has no buffer",
                     type_name(data), type_name(arr.get()));
        return nullptr;
      }
      return from_buffer(arr.get(), dtype_given, code, layout);
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
  }
  if (is_tensor(data)) {
    const sw::Layout& l = layout_of(as_tensor(data)->layout);
    if (l.size() == 0) {
      // No value to read (tolist's [] has lost the shape): the shape is the
      // leaf extents, the dtype the tensor's where CPU holds it.
      const sw::DTypeCode own = dtype_code(as_tensor(data)->dtype);
      if (!dtype_given)
        code = own == sw::DTypeCode::Int32 || own == sw::DTypeCode::Bool ? own : sw::DTypeCode::Float32;
      Placement p;
      if (place(layout, sw::data::leaf_extents(l), &p) < 0) return nullptr;
      void* dst = nullptr;
      Ref carrier = allocate(p, code, &dst);
      return carrier ? finish(std::move(carrier), p) : nullptr;
    }
    // A Tensor reads through tolist (its own __array__ would need NumPy).
    Ref values = Ref::steal(tensor_tolist(data, nullptr));
    if (!values) return nullptr;
    if (!PyList_Check(values.get())) return from_values(values.get(), true, dtype_given, code, layout);
    return from_values(values.get(), false, dtype_given, code, layout);
  }
  if (is_level(data)) return from_values(data, false, dtype_given, code, layout);
  if (is_number_like(data)) return from_values(data, true, dtype_given, code, layout);
  // tensor() never consumes DLPack (API.md section 11); the import does.
  if (PyCapsule_CheckExact(data) || PyObject_HasAttrString(data, "__dlpack__")) {
    PyErr_Format(PyExc_TypeError,
                 "tensor() does not read DLPack %s; strideweave.from_dlpack(x) imports it (without a copy, or "
                 "with copy=True)",
                 PyCapsule_CheckExact(data) ? "capsules" : "objects without __array__ or the buffer protocol");
    return nullptr;
  }
  PyErr_Format(PyExc_TypeError,
               "tensor() expects an object with the buffer protocol or __array__, a nested sequence of numbers "
               "or a number, not %.100s",
               type_name(data));
  return nullptr;
}

PyObject* tensor_fn(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"data", "dtype", "layout", nullptr};
  PyObject *data, *dtype = Py_None, *layout = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:tensor", const_cast<char**>(kwlist), &data, &dtype,
                                   &layout))
    return nullptr;
  return tensor_from_data(data, dtype, layout);
}

// ------------------------------------------------------------- way out

// Builds nested lists over leaf modes (first leaf outermost, as an export's
// dims) from a value reader get(slot).
template <class Get>
PyObject* nest(const std::vector<sw::LeafMode>& leaves, size_t k, int64_t base, Get& get) {
  const int64_t n = leaves[k].extent, s = leaves[k].stride;
  // On failure the unfilled items are NULL, which list dealloc skips.
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(n)));
  if (!list) return nullptr;
  PyObject** items = reinterpret_cast<PyListObject*>(list.get())->ob_item;
  if (k + 1 == leaves.size()) {  // innermost: the values themselves
    for (int64_t i = 0, at = base; i < n; ++i, at += s)
      if (!(items[i] = get(at))) return nullptr;
    return list.release();
  }
  for (int64_t i = 0; i < n; ++i)
    if (!(items[i] = nest(leaves, k + 1, base + i * s, get))) return nullptr;
  return list.release();
}

template <class Get>
PyObject* build(const sw::Layout& l, int64_t offset, Get get) {
  if (l.leaves().empty()) return get(offset);  // rank 0: the scalar
  if (Py_EnterRecursiveCall(" in Tensor.tolist()")) return nullptr;
  PyObject* r = nest(l.leaves(), 0, offset, get);
  Py_LeaveRecursiveCall();
  return r;
}

// Values of host storage (CPU memory or a FileBacked span read at once).
PyObject* build_host(const sw::Layout& l, int64_t offset, const void* data, sw::DTypeCode code) {
  switch (code) {
    case sw::DTypeCode::Float32: {
      const float* p = static_cast<const float*>(data);
      return build(l, offset, [p](int64_t i) { return PyFloat_FromDouble(p[i]); });
    }
    case sw::DTypeCode::Int32: {
      const int32_t* p = static_cast<const int32_t*>(data);
      return build(l, offset, [p](int64_t i) { return PyLong_FromLong(p[i]); });
    }
    case sw::DTypeCode::Floating:
    case sw::DTypeCode::Float64: {
      const double* p = static_cast<const double*>(data);
      return build(l, offset, [p](int64_t i) { return PyFloat_FromDouble(p[i]); });
    }
    default: {
      const uint8_t* p = static_cast<const uint8_t*>(data);
      return build(l, offset, [p](int64_t i) { return PyBool_FromLong(p[i]); });
    }
  }
}

// FileBacked fast path: one read of the tensor's span instead of one read
// per element. NULL without an exception when the carrier does not qualify.
PyObject* tolist_file_backed(PyObject* c, const sw::Layout& l, int64_t offset) {
  if (Py_TYPE(c) != &FileBacked_Type || as_carrier(c)->released) return nullptr;
  FileBackedObject* fb = reinterpret_cast<FileBackedObject*>(c);
  const sw::DTypeCode code = dtype_code(fb->dtype);
  const int item = sw::itemsize(code);
  if (item == 0 || !sw::span_fits(offset, fb->size, l.cosize())) return nullptr;
  std::vector<unsigned char> buf;
  if (engine_call([&] {
        buf.resize(static_cast<size_t>(l.cosize()) * static_cast<size_t>(item));
        fb->file.read(offset * item, buf.data(), static_cast<int64_t>(buf.size()));
      }) < 0)
    return nullptr;
  return build_host(l, 0, buf.data(), code);
}

}  // namespace

PyObject* tensor_tolist(PyObject* self, PyObject*) {
  if (tensor_reject_multi(self, "tolist()") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  const sw::Layout& l = layout_of(t->layout);
  PyObject* c = t->carrier;
  if (!carrier_overrides(c, "get_value")) {
    if (void* data = carrier_host_data(c)) {
      // Values of the carrier's storage dtype (the tensor's when single).
      return build_host(l, t->offset, data, as_carrier(c)->vt->dtype_code(as_carrier(c)));
    }
    PyObject* r = tolist_file_backed(c, l, t->offset);
    if (r || PyErr_Occurred()) return r;
  }
  // Every other carrier: its public reads (released/evicted checks included).
  return build(l, t->offset, [c](int64_t i) { return carrier_get(c, static_cast<Py_ssize_t>(i)); });
}

PyObject* tensor_item(PyObject* self, PyObject*) {
  if (tensor_reject_multi(self, "item()") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  const sw::Layout& l = layout_of(t->layout);
  if (l.size() != 1) {
    PyErr_Format(PyExc_ValueError, "item() needs a tensor with exactly one element; this one has %lld (shape %R)",
                 static_cast<long long>(l.size()), layout_shape_or_none(t->layout));
    return nullptr;
  }
  return carrier_get(t->carrier, t->offset + static_cast<Py_ssize_t>(l.index_of_ordinal(0)));
}

PyObject* tensor_array(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"dtype", "copy", nullptr};
  PyObject *dtype = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", const_cast<char**>(kwlist), &dtype, &copy))
    return nullptr;
  int copy_flag = -1;  // None
  if (copy != Py_None) {
    copy_flag = PyObject_IsTrue(copy);
    if (copy_flag < 0) return nullptr;
  }
  if (tensor_reject_multi(self, "__array__") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  // Said as every other read says it (DLPack's own refusal would speak of a
  // null data pointer).
  const int released = carrier_is_released(t->carrier);
  if (released < 0) return nullptr;
  if (released) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s carrier is released: the tensor has no values to convert (was it moved? use the tensor "
                 "the move returned)",
                 type_name(t->carrier));
    return nullptr;
  }
  Ref np = Ref::steal(PyImport_ImportModule("numpy"));
  if (!np) return nullptr;
  const sw::DTypeCode code = dtype_code(t->dtype);
  const bool zero_copy = PyObject_TypeCheck(t->carrier, &CPU_Type) &&
                         (code == sw::DTypeCode::Float32 || code == sw::DTypeCode::Int32);
  if (zero_copy) {
    // The view np.from_dlpack gives; asarray applies dtype/copy with NumPy's
    // own rules (copy=False with a dtype change raises ValueError there).
    Ref view = Ref::steal(PyObject_CallMethod(np.get(), "from_dlpack", "O", self));
    if (!view) return nullptr;
    if (copy_flag != 1 && dtype == Py_None) return view.release();
    // np.array copies; np.asarray(copy=False) refuses a cast that would copy.
    Ref fn = Ref::steal(PyObject_GetAttrString(np.get(), copy_flag == 1 ? "array" : "asarray"));
    Ref a = Ref::steal(PyTuple_Pack(1, view.get()));
    Ref kw = Ref::steal(copy_flag == 0 ? Py_BuildValue("{sOsO}", "dtype", dtype, "copy", Py_False)
                                       : Py_BuildValue("{sO}", "dtype", dtype));
    if (!fn || !a || !kw) return nullptr;
    return PyObject_Call(fn.get(), a.get(), kw.get());
  }
  if (copy_flag == 0) {
    const char* dname =
        code == sw::DTypeCode::Compound ? type_name(t->dtype) : reinterpret_cast<DTypeObject*>(t->dtype)->name;
    const char* cname = type_name(t->carrier);
    PyErr_Format(PyExc_ValueError,
                 "%s %s tensor on %s %s carrier cannot be viewed by NumPy without a copy (only CPU Float32 and "
                 "Int32 tensors can); use copy=None or copy=True",
                 article(dname), dname, article(cname), cname);
    return nullptr;
  }
  const char* np_dtype = sw::numpy_dtype_name(code);
  Ref arr;
  if (layout_of(t->layout).size() == 0) {
    // tolist's [] has lost the shape of an empty tensor.
    Ref shape = Ref::steal(tensor_get_shape(self, nullptr));
    if (!shape) return nullptr;
    arr = Ref::steal(PyObject_CallMethod(np.get(), "zeros", "Os", shape.get(), np_dtype));
  } else {
    Ref values = Ref::steal(tensor_tolist(self, nullptr));
    if (!values) return nullptr;
    arr = Ref::steal(PyObject_CallMethod(np.get(), "array", "Os", values.get(), np_dtype));
  }
  if (!arr || dtype == Py_None) return arr.release();
  return PyObject_CallMethod(arr.get(), "astype", "O", dtype);
}

PyObject* tensor_numpy(PyObject* self, PyObject*) {
  Ref np = Ref::steal(PyImport_ImportModule("numpy"));
  if (!np) return nullptr;
  return PyObject_CallMethod(np.get(), "asarray", "O", self);
}

namespace {
PyMethodDef data_functions[] = {
    {"tensor", method_cast(tensor_fn),
     METH_VARARGS | METH_KEYWORDS,
     "tensor(data, *, dtype=None, layout=None)\n--\n\n"
     "A new Tensor over fresh CPU storage holding a copy of data: an object with the buffer protocol "
     "(NumPy arrays of any strides, memoryview, array.array), an object with __array__, a rectangular "
     "nested sequence of numbers/bools, or a single number (rank 0). dtype=None infers Float32 (floats), "
     "Int32 (integers) or Bool; layout=None is row-major over the data's shape, a given layout's leaf "
     "extents must equal that shape (holes are zero)."},
    {nullptr, nullptr, 0, nullptr}};
}  // namespace

int tensor_data_module_init(PyObject* module) { return PyModule_AddFunctions(module, data_functions); }

}  // namespace swpy

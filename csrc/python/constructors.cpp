// Tensor constructors: strideweave.zeros, ones, full, empty and arange. Each
// makes a fresh CPU carrier in the row-major layout strideweave.tensor()
// gives data of that shape, and fills it natively (kernels.hpp: memset-speed
// fills, a vectorized arange), with the GIL released for large tensors.
//
// Decisions where API.md is silent (NumPy's where it has one):
//  - shape is an int or a tuple/list of ints (or a flat Shape; a
//    hierarchical one is TypeError), every extent >= 0: zeros(0) and
//    zeros((2, 0)) are empty tensors, as NumPy's (their Layout has an extent-0
//    mode, as a DLPack import of an empty array does; a Shape object itself
//    still refuses extent 0). A negative extent is ValueError.
//  - zeros/ones/empty default to Float32 (NumPy's float64 is not a storage
//    dtype; Float32 is what strideweave.tensor() makes of floats); full
//    infers from its value as tensor() does (bool -> Bool, int -> Int32,
//    float -> Float32); arange infers Int32 from int arguments, else Float32.
//  - arange's Float32 values are start + i * step formed in double and
//    rounded once (NumPy steps in float32, which can differ in the last bit);
//    its length is NumPy's ceil((stop - start) / step), 0 for an empty range
//    (an empty tensor).
//  - A value that a slot of the dtype cannot hold fails as a slot write does
//    (TypeError / OverflowError), before anything is allocated.
//  - Layout objects are immutable, so tensors of one shape may share one:
//    the last few row-major layouts made here are reused.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "data/shape.hpp"
#include "dtype/info.hpp"
#include "ops/kernels.hpp"
#include "storage/slot_codec.hpp"
#include "carrier_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/args.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/fastcall.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

// Fills above this many elements release the GIL (as tensor() does).
constexpr int64_t kGilFreeElements = 1 << 16;

// ------------------------------------------------------------ shapes

struct Extents {
  static constexpr size_t kInline = 8;
  int64_t inline_[kInline];
  std::vector<int64_t> heap;
  size_t n = 0;
  int64_t* data() { return n <= kInline ? inline_ : heap.data(); }
  const int64_t* data() const { return n <= kInline ? inline_ : heap.data(); }
  std::span<const int64_t> span() const { return {data(), n}; }
};

int bad_shape(const char* fn, PyObject* shape) {
  PyErr_Format(PyExc_TypeError, "%s() shape must be an int or a tuple of ints, not %.100s", fn,
               Py_TYPE(shape)->tp_name);
  return -1;
}

int extent_of(const char* fn, PyObject* shape, PyObject* item, int64_t* out) {
  if (is_bool(item) || !PyIndex_Check(item)) return bad_shape(fn, shape);
  const Py_ssize_t v = PyNumber_AsSsize_t(item, PyExc_OverflowError);
  if (v == -1 && PyErr_Occurred()) return -1;
  *out = v;
  return 0;
}

int parse_shape(const char* fn, PyObject* shape, Extents* out) {
  // A flat Shape is its extents; a hierarchical one has no single row-major
  // order the constructors could pick (its leaves or its top-level extents),
  // so it is refused with the ways out.
  if (PyObject_TypeCheck(shape, &Shape_Type) && tree_of(shape).depth() > 1) {
    PyErr_Format(PyExc_TypeError,
                 "%s() takes a flat shape (an int, a tuple of ints or a flat Shape), not the hierarchical %R: pass "
                 "its leaf extents %s, or build Tensor(CPU(n), 0, Layout.canonical(shape)) for its layout",
                 fn, shape, sw::data::shape_text(tree_of(shape).leaves()).c_str());
    return -1;
  }
  // A sequence of ints (a tuple, a list, a flat Shape, an ndarray's shape or
  // a 1-d int array), or one int.
  const bool sequence = PyTuple_Check(shape) || PyList_Check(shape) || (!is_bool(shape) && PySequence_Check(shape));
  if (!sequence && !is_bool(shape) && PyIndex_Check(shape)) {
    out->n = 1;
    if (extent_of(fn, shape, shape, &out->inline_[0]) < 0) return -1;
  } else if (sequence && !PyUnicode_Check(shape) && !PyBytes_Check(shape)) {
    Ref items = Ref::steal(PySequence_Tuple(shape));  // __index__ may change a list
    if (!items) return -1;
    const Py_ssize_t n = PyTuple_GET_SIZE(items.get());
    if (n > sw::data::kMaxRank) {
      PyErr_Format(PyExc_ValueError, "%s() supports at most %d dimensions, got %zd", fn, sw::data::kMaxRank, n);
      return -1;
    }
    out->n = static_cast<size_t>(n);
    if (out->n > Extents::kInline) out->heap.resize(out->n);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (extent_of(fn, shape, PyTuple_GET_ITEM(items.get(), i), &out->data()[i]) < 0) return -1;
  } else {
    return bad_shape(fn, shape);
  }
  if (!sw::data::extents_non_negative(out->span())) {
    PyErr_Format(PyExc_ValueError, "%s() needs every extent >= 0 (negative dimensions are not allowed), got shape %s", fn,
                 sw::data::shape_text(out->span()).c_str());
    return -1;
  }
  int64_t count = 1;
  for (int64_t e : out->span())
    if (__builtin_mul_overflow(count, e, &count) || count > PY_SSIZE_T_MAX / 8) {
      PyErr_Format(PyExc_ValueError, "%s() shape %s has too many elements", fn,
                   sw::data::shape_text(out->span()).c_str());
      return -1;
    }
  return 0;
}

// The row-major Layout object of extents (the last extent's stride is 1).
PyObject* row_major_layout(const Extents& e) {
  LeafBuffer buf;
  std::span<sw::LeafMode> leaves;
  if (engine_call([&] { leaves = buf.resize(e.n); }) < 0) return nullptr;
  int64_t stride = 1;  // no overflow: parse_shape bounded the element count
  for (size_t k = e.n; k-- > 0;) {
    leaves[k] = sw::LeafMode{e.data()[k], stride};
    stride *= e.data()[k];
  }
  return flat_layout_object(leaves);
}

// ------------------------------------------------------------ dtypes

// The dtype= argument: a DType CPU holds (or a NumPy dtype naming one); NULL
// keeps *code.
int parse_dtype(const char* fn, PyObject* arg, sw::DTypeCode* code) {
  if (!arg || arg == Py_None) return 0;
  PyObject* d = nullptr;
  const int r = dtype_resolve(arg, &d);
  if (r < 0) return -1;
  if (r == 0) {
    PyErr_Format(PyExc_TypeError, "%s() dtype must be a DType (or a NumPy dtype), not %.100s", fn, type_name(arg));
    return -1;
  }
  const sw::DTypeCode c = dtype_code(d);
  if (c != sw::DTypeCode::Float32 && c != sw::DTypeCode::Int32 && c != sw::DTypeCode::Bool) {
    PyErr_Format(PyExc_ValueError,
                 "%s() makes CPU tensors, which cannot hold dtype %R; use sw.float32, sw.int32 or sw.bool_", fn, d);
    return -1;
  }
  *code = c;
  return 0;
}

// ------------------------------------------------------------ tensors

// A fresh CPU tensor of extents and code, filled by fill(void* data,
// int64_t n) (engine code; the GIL is released for large tensors). With
// zero, the storage starts zeroed and fill may be empty.
template <class Fill>
PyObject* make(const Extents& e, sw::DTypeCode code, bool zero, Fill&& fill) {
  Ref layout = Ref::steal(row_major_layout(e));
  if (!layout) return nullptr;
  const int64_t n = layout_of(layout.get()).size();
  Ref carrier = Ref::steal(cpu_new(static_cast<Py_ssize_t>(n), code, true, /*empty=*/!zero));
  if (!carrier) return nullptr;
  if (n == 0) return tensor_new(carrier.get(), 0, layout.get());  // empty: no slot to fill
  void* data = carrier_host_data(carrier.get());
  int rc;
  if (n >= kGilFreeElements) {
    GilRelease nogil;
    rc = engine_call([&] { fill(data, n); });
  } else {
    rc = engine_call([&] { fill(data, n); });
  }
  if (rc < 0) return nullptr;
  return tensor_new(carrier.get(), 0, layout.get());
}

// Parses (shape, *, dtype=...) of zeros/ones/empty.
int shape_and_dtype(const Signature& sig, KeywordCache& cache, PyObject* const* args, Py_ssize_t nargsf,
                    PyObject* kwnames, Extents* e, sw::DTypeCode* code) {
  PyObject* a[2];
  if (parse_args(sig, cache, args, static_cast<size_t>(nargsf), kwnames, a) < 0) return -1;
  *code = sw::DTypeCode::Float32;
  if (parse_shape(sig.name, a[0], e) < 0 || parse_dtype(sig.name, a[1], code) < 0) return -1;
  return 0;
}

constexpr Signature kZeros{"zeros", {"shape", "dtype"}, 1, 0, 1};
constexpr Signature kOnes{"ones", {"shape", "dtype"}, 1, 0, 1};
constexpr Signature kEmpty{"empty", {"shape", "dtype"}, 1, 0, 1};

PyObject* fn_zeros(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Extents e;
  sw::DTypeCode code;
  if (shape_and_dtype(kZeros, module_state.keywords.zeros, args, nargs, kwnames, &e, &code) < 0) return nullptr;
  return make(e, code, true, [](void*, int64_t) {});
}

PyObject* fn_empty(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Extents e;
  sw::DTypeCode code;
  if (shape_and_dtype(kEmpty, module_state.keywords.empty, args, nargs, kwnames, &e, &code) < 0) return nullptr;
  return make(e, code, false, [](void*, int64_t) {});
}

// A tensor whose every slot holds v (already valid for code).
PyObject* filled(const Extents& e, sw::DTypeCode code, PyObject* v) {
  unsigned char bytes[sw::codec::kMaxSlotBytes];
  if (encode_slot(code, v, bytes) < 0) return nullptr;
  const int item = sw::codec::slot_bytes(code);
  return make(e, code, false, [&](void* data, int64_t n) { sw::kernels::fill(data, n, item, bytes); });
}

PyObject* fn_ones(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Extents e;
  sw::DTypeCode code;
  if (shape_and_dtype(kOnes, module_state.keywords.ones, args, nargs, kwnames, &e, &code) < 0) return nullptr;
  Ref one = Ref::steal(code == sw::DTypeCode::Bool ? Py_NewRef(Py_True) : PyLong_FromLong(1));
  if (!one) return nullptr;
  return filled(e, code, one.get());
}

// The dtype a number infers (tensor()'s rule): Bool, Int32 or Float32.
int inferred_code(const char* fn, PyObject* v, sw::DTypeCode* code) {
  if (is_bool(v))
    *code = sw::DTypeCode::Bool;
  else if (PyLong_Check(v) || PyIndex_Check(v))
    *code = sw::DTypeCode::Int32;
  else if (PyFloat_Check(v) || (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float && !PySequence_Check(v)))
    *code = sw::DTypeCode::Float32;
  else {
    PyErr_Format(PyExc_TypeError, "%s() value must be a number or a bool, not %.100s", fn, Py_TYPE(v)->tp_name);
    return -1;
  }
  return 0;
}

PyObject* fn_full(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"shape", "value", "dtype", nullptr};
  PyObject *shape, *value, *dtype = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$O:full", const_cast<char**>(kwlist), &shape, &value, &dtype))
    return nullptr;
  Extents e;
  if (parse_shape("full", shape, &e) < 0) return nullptr;
  sw::DTypeCode code;
  if (dtype == Py_None) {
    if (inferred_code("full", value, &code) < 0) return nullptr;
  } else if (parse_dtype("full", dtype, &code) < 0) {
    return nullptr;
  }
  if (code == sw::DTypeCode::Bool && is_bool(value) && !PyBool_Check(value)) {
    // A NumPy bool is a bool here, as in tensor().
    const int t = PyObject_IsTrue(value);
    if (t < 0) return nullptr;
    return filled(e, code, t ? Py_True : Py_False);
  }
  return filled(e, code, value);
}

// ------------------------------------------------------------ arange

bool is_int_number(PyObject* v) {
  if (is_bool(v)) return false;
  return PyLong_Check(v) || (PyIndex_Check(v) && !PyFloat_Check(v));
}

int arange_number(PyObject* v, const char* what) {
  if (is_bool(v) ||
      !(PyIndex_Check(v) || PyFloat_Check(v) || (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float))) {
    PyErr_Format(PyExc_TypeError, "arange() %s must be an int or a float, not %.100s", what, Py_TYPE(v)->tp_name);
    return -1;
  }
  return 0;
}

int as_i64(PyObject* v, int64_t* out) {
  Ref i = Ref::steal(PyNumber_Index(v));
  if (!i) return -1;
  int overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
  if (*out == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    PyErr_SetString(PyExc_OverflowError, "arange() argument out of the Int32 range");
    return -1;
  }
  return 0;
}

PyObject* fn_arange(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"start", "stop", "step", "dtype", nullptr};
  PyObject *a = nullptr, *b = Py_None, *c = Py_None, *dtype = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO$O:arange", const_cast<char**>(kwlist), &a, &b, &c, &dtype))
    return nullptr;
  // arange(stop) or arange(start, stop[, step]), as NumPy's.
  Ref zero = Ref::steal(PyLong_FromLong(0)), one = Ref::steal(PyLong_FromLong(1));
  if (!zero || !one) return nullptr;
  PyObject* start = b == Py_None ? zero.get() : a;
  PyObject* stop = b == Py_None ? a : b;
  PyObject* step = c == Py_None ? one.get() : c;
  if (arange_number(start, "start") < 0 || arange_number(stop, "stop") < 0 || arange_number(step, "step") < 0)
    return nullptr;
  const bool ints = is_int_number(start) && is_int_number(stop) && is_int_number(step);
  sw::DTypeCode code = ints ? sw::DTypeCode::Int32 : sw::DTypeCode::Float32;
  if (parse_dtype("arange", dtype, &code) < 0) return nullptr;
  if (code == sw::DTypeCode::Bool) {
    PyErr_SetString(PyExc_ValueError, "arange() makes Float32 or Int32 tensors, not Bool");
    return nullptr;
  }
  Extents e;
  e.n = 1;
  if (code == sw::DTypeCode::Int32) {
    if (!ints) {
      PyErr_Format(PyExc_TypeError, "arange() with dtype Int32 takes int arguments, got (%R, %R, %R)", start, stop,
                   step);
      return nullptr;
    }
    int64_t s0, s1, st;
    if (as_i64(start, &s0) < 0 || as_i64(stop, &s1) < 0 || as_i64(step, &st) < 0) return nullptr;
    if (st == 0) {
      PyErr_SetString(PyExc_ValueError, "arange() step must not be zero");
      return nullptr;
    }
    int64_t n = 0;
    if (engine_call([&] { n = sw::kernels::arange_count(s0, s1, st); }) < 0) return nullptr;
    // Both ends in Int32 range means every value is (the values are monotone).
    int64_t last;
    if (n > 0 && (__builtin_mul_overflow(n - 1, st, &last) || __builtin_add_overflow(last, s0, &last) || s0 < INT32_MIN ||
        s0 > INT32_MAX || last < INT32_MIN || last > INT32_MAX)) {
      PyErr_Format(PyExc_OverflowError, "arange(%R, %R, %R) leaves the Int32 range", start, stop, step);
      return nullptr;
    }
    e.inline_[0] = n;
    return make(e, code, false, [&](void* data, int64_t count) {
      sw::kernels::arange_i32(static_cast<int32_t*>(data), count, s0, st);
    });
  }
  const double s0 = PyFloat_AsDouble(start);
  if (s0 == -1.0 && PyErr_Occurred()) return nullptr;
  const double s1 = PyFloat_AsDouble(stop);
  if (s1 == -1.0 && PyErr_Occurred()) return nullptr;
  const double st = PyFloat_AsDouble(step);
  if (st == -1.0 && PyErr_Occurred()) return nullptr;
  if (st == 0.0) {
    PyErr_SetString(PyExc_ValueError, "arange() step must not be zero");
    return nullptr;
  }
  int64_t n = 0;
  if (engine_call([&] { n = sw::kernels::arange_count(s0, s1, st); }) < 0) return nullptr;
  const double last = s0 + static_cast<double>(n - 1) * st;
  if (n > 0 && (!std::isfinite(s0) || !std::isfinite(last) || std::isinf(static_cast<float>(s0)) ||
      std::isinf(static_cast<float>(last)))) {
    PyErr_Format(PyExc_OverflowError, "arange(%R, %R, %R) leaves the Float32 range", start, stop, step);
    return nullptr;
  }
  e.inline_[0] = n;
  return make(e, code, false, [&](void* data, int64_t count) {
    sw::kernels::arange_f32(static_cast<float*>(data), count, s0, st);
  });
}

PyMethodDef constructor_functions[] = {
    {"zeros", method_cast(fn_zeros), METH_FASTCALL | METH_KEYWORDS,
     "zeros(shape, *, dtype=DType.Float32)\n--\n\n"
     "A new CPU tensor of zeros in the row-major layout (as strideweave.tensor gives); shape is an int or a "
     "tuple of ints (each >= 0; an extent 0 makes an empty tensor); dtype is a DType or a NumPy dtype (Float32, Int32 or Bool)."},
    {"ones", method_cast(fn_ones), METH_FASTCALL | METH_KEYWORDS,
     "ones(shape, *, dtype=DType.Float32)\n--\n\nA new CPU tensor of ones (True for Bool), row-major."},
    {"empty", method_cast(fn_empty), METH_FASTCALL | METH_KEYWORDS,
     "empty(shape, *, dtype=DType.Float32)\n--\n\nA new CPU tensor whose values are not initialised, row-major."},
    {"full", method_cast(fn_full), METH_VARARGS | METH_KEYWORDS,
     "full(shape, value, *, dtype=None)\n--\n\n"
     "A new CPU tensor with every element value, row-major; dtype=None infers it from value as tensor() does "
     "(bool -> Bool, int -> Int32, float -> Float32)."},
    {"arange", method_cast(fn_arange), METH_VARARGS | METH_KEYWORDS,
     "arange(stop) / arange(start, stop, step=1, *, dtype=None)\n--\n\n"
     "A new rank-1 CPU tensor of start, start + step, ... below stop (NumPy's length ceil((stop - start) / "
     "step), an empty tensor when that is 0). dtype=None gives Int32 for int arguments, else Float32 (each value "
     "start + i * step rounded once)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int constructors_module_init(PyObject* module) { return PyModule_AddFunctions(module, constructor_functions); }

}  // namespace swpy

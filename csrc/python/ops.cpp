// The differentiable operations broadcast_to, add, mul, relu and reduce_sum,
// each a native Operation subclass whose _forward computes the result and
// whose backward returns one gradient per saved input.
//
// Storage paths. An operand whose carrier is native host memory (CPU) is
// computed by the engine kernels (csrc/engine/kernels.hpp) straight on the
// carrier's buffer; a Generic operand is computed value by value in Python
// arithmetic and stored through carrier_new_like, which coerces (Float32
// rounds to binary32, Int32 is range checked). Every result is fresh compact
// storage (the canonical layout of its shape, offset 0) of the operands'
// exact carrier class; broadcast_to alone is a view on the same carrier.
//
// Gradients follow the layout rule of autograd (grad_layout_for): the
// input's own layout when it is injective, else the canonical layout of its
// shape, in fresh storage of the cotangent's carrier class. Backward reads
// saved inputs from their carriers when it runs, not from a forward copy.
//
// Decisions where the contract is silent: reduce_sum returns a rank-0
// tensor (Layout(Shape(), Stride()), like NumPy and PyTorch); operands must
// share one dtype (TypeError); Bool tensors are rejected (TypeError); Int32
// results out of range raise OverflowError on both paths; an Int32 tensor
// multiplies only by an int; relu keeps NaN and its backward is
// g where x > 0 else 0.
#include <cmath>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <vector>

#include "kernels.hpp"
#include "sw.hpp"

namespace swpy {

namespace {

namespace K = sw::kernels;
using Leaves = K::Leaves;
using sw::DTypeCode;

// ------------------------------------------------------------ operands

struct Operand {
  PyObject* tensor = nullptr;   // borrowed
  PyObject* carrier = nullptr;  // borrowed
  Py_ssize_t offset = 0;
  const sw::Layout* layout = nullptr;
  DTypeCode dtype = DTypeCode::Any;
  void* host = nullptr;  // slot 0 of native host storage; NULL on the values path

  const sw::Layout& L() const { return *layout; }
  // Address of the tensor's offset slot in host storage.
  const void* at() const {
    return static_cast<const char*>(host) + static_cast<size_t>(offset) * sw::itemsize(dtype);
  }
  bool host_f32() const { return host && dtype == DTypeCode::Float32; }
};

const char* dtype_name_of(PyObject* t) {
  PyObject* d = as_tensor(t)->dtype;
  if (!d) return "?";
  if (dtype_code(d) == DTypeCode::Compound) return _PyType_Name(Py_TYPE(d));
  return reinterpret_cast<DTypeObject*>(d)->name;
}

int reject_multi(PyObject* t, const char* op) {
  char reason[96];
  std::snprintf(reason, sizeof reason, "operation %s", op);
  return tensor_reject_multi(t, reason);
}

int check_live(const Operand& o, const char* op) {
  int r = carrier_is_released(o.carrier);
  if (r < 0) return -1;
  if (r) {
    PyErr_Format(PyExc_RuntimeError, "%s(): the tensor's %s carrier is released", op,
                 _PyType_Name(Py_TYPE(o.carrier)));
    return -1;
  }
  return 0;
}

// Fills o from a Tensor argument without storage checks (for views).
int view_operand(PyObject* t, const char* op, Operand* o) {
  if (!is_tensor(t)) {
    PyErr_Format(PyExc_TypeError, "%s() expects a Tensor, not %.100s", op, Py_TYPE(t)->tp_name);
    return -1;
  }
  if (reject_multi(t, op) < 0) return -1;
  TensorObject* tt = as_tensor(t);
  o->tensor = t;
  o->carrier = tt->carrier;
  o->offset = tt->offset;
  o->layout = &layout_of(tt->layout);
  o->dtype = dtype_code(tt->dtype);
  return check_live(*o, op);
}

// A computed operand: a live CPU (host) or Generic tensor of a dtype the
// arithmetic supports.
int compute_operand(PyObject* t, const char* op, Operand* o) {
  if (view_operand(t, op, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  if (!o->host && !PyObject_TypeCheck(o->carrier, &Generic_Type)) {
    PyErr_Format(PyExc_TypeError, "%s() supports CPU and Generic tensors, not a %s carrier", op,
                 _PyType_Name(Py_TYPE(o->carrier)));
    return -1;
  }
  const bool ok = o->host ? K::supports(o->dtype)
                          : (o->dtype == DTypeCode::Any || o->dtype == DTypeCode::Floating ||
                             o->dtype == DTypeCode::Float32 || o->dtype == DTypeCode::Int32);
  if (!ok) {
    PyErr_Format(PyExc_TypeError, "%s() does not support %s tensors", op, dtype_name_of(t));
    return -1;
  }
  return 0;
}

int check_pair(const Operand& a, const Operand& b, const char* op) {
  if (Py_TYPE(a.carrier) != Py_TYPE(b.carrier)) {
    PyErr_Format(PyExc_TypeError, "%s() needs tensors of one carrier class, got %s and %s", op,
                 _PyType_Name(Py_TYPE(a.carrier)), _PyType_Name(Py_TYPE(b.carrier)));
    return -1;
  }
  if (a.dtype != b.dtype || (a.dtype == DTypeCode::Compound)) {
    PyErr_Format(PyExc_TypeError, "%s() needs tensors of one dtype, got %s and %s", op,
                 dtype_name_of(a.tensor), dtype_name_of(b.tensor));
    return -1;
  }
  return 0;
}

// Runs a kernel call, translating engine exceptions. 0 / -1.
template <class F>
int guarded(const char* op, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::overflow_error&) {
    PyErr_Format(PyExc_OverflowError, "%s(): Int32 result out of range", op);
  } catch (const std::invalid_argument& e) {
    PyErr_Format(PyExc_ValueError, "%s(): %s", op, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  }
  return -1;
}

// Scalar indices of every coordinate of a leaf list, first leaf fastest.
int index_list(const Leaves& l, std::vector<int64_t>& out) {
  try {
    out.clear();
    out.reserve(static_cast<size_t>(K::element_count(l)));
    sw::for_each_index(l, [&](int64_t, int64_t idx) { out.push_back(idx); });
    return 0;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return -1;
  }
}

// ------------------------------------------------------------ results

// Fresh host storage of like's exact class (CPU or a CPU subclass) with n
// slots of dtype; *data receives slot 0.
PyObject* alloc_host(PyObject* like, Py_ssize_t n, DTypeCode dtype, bool zero, void** data) {
  PyObject* c;
  if (Py_TYPE(like) == &CPU_Type) {
    c = cpu_new(n, dtype, true, !zero);
  } else {
    c = carrier_allocate_like(like, n, true, dtype_singleton(dtype), !zero);
  }
  if (!c) return nullptr;
  *data = carrier_host_data(c);
  if (!*data) {
    Py_DECREF(c);
    PyErr_Format(PyExc_TypeError, "%s.allocate_like() returned storage without host memory",
                 _PyType_Name(Py_TYPE(like)));
    return nullptr;
  }
  return c;
}

// Tensor over carrier (stolen) at offset 0 in layout l; layout_obj is used
// when given (borrowed), else a new Layout object is built.
PyObject* wrap(PyObject* carrier, const sw::Layout& l, PyObject* layout_obj) {
  if (!carrier) return nullptr;
  PyObject* lo = layout_obj ? Py_NewRef(layout_obj) : layout_from_engine(l);
  if (!lo) { Py_DECREF(carrier); return nullptr; }
  PyObject* t = tensor_new(carrier, 0, lo);
  Py_DECREF(lo);
  Py_DECREF(carrier);
  return t;
}

// Values path: a list of n zeros of dtype.
PyObject* zero_list(DTypeCode dtype, Py_ssize_t n) {
  PyObject* list = PyList_New(n);
  if (!list) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* z = value_zero(dtype);
    if (!z) { Py_DECREF(list); return nullptr; }
    PyList_SET_ITEM(list, i, z);
  }
  return list;
}

PyObject* get_slot(const Operand& o, int64_t idx) {
  return carrier_get(o.carrier, o.offset + static_cast<Py_ssize_t>(idx));
}

// list[slot] = list[slot] + v (v stolen). 0 / -1.
int list_accumulate(PyObject* list, int64_t slot, PyObject* v) {
  if (!v) return -1;
  PyObject* old = PyList_GET_ITEM(list, slot);
  PyObject* s = PyNumber_Add(old, v);
  Py_DECREF(v);
  if (!s) return -1;
  PyList_SET_ITEM(list, slot, s);
  Py_DECREF(old);
  return 0;
}

void list_store(PyObject* list, int64_t slot, PyObject* v) {
  PyObject* old = PyList_GET_ITEM(list, slot);
  PyList_SET_ITEM(list, slot, v);
  Py_DECREF(old);
}

// ------------------------------------------------------------ broadcasting

sw::IntTree broadcast_tree(const sw::IntTree& a, const sw::IntTree& b) {
  if (a.is_leaf != b.is_leaf) throw std::invalid_argument("a leaf faces a nested mode");
  if (a.is_leaf) {
    if (a.value == b.value || b.value == 1) return a;
    if (a.value == 1) return b;
    throw std::invalid_argument("extents " + std::to_string(a.value) + " and " + std::to_string(b.value) +
                                " differ and neither is 1");
  }
  if (a.children.size() != b.children.size())
    throw std::invalid_argument("modes of different ranks (" + std::to_string(a.children.size()) + " and " +
                                std::to_string(b.children.size()) + ")");
  std::vector<sw::IntTree> c;
  c.reserve(a.children.size());
  for (size_t i = 0; i < a.children.size(); ++i) c.push_back(broadcast_tree(a.children[i], b.children[i]));
  return sw::IntTree::node(std::move(c));
}

// Output shape of a binary operation and both operands' iteration leaves.
int broadcast_pair(const Operand& a, const Operand& b, const char* op, sw::Layout* out, Leaves* la,
                   Leaves* lb) {
  try {
    sw::IntTree shape = broadcast_tree(a.L().shape(), b.L().shape());
    *la = a.L().broadcast_to(shape).leaves();
    *lb = b.L().broadcast_to(shape).leaves();
    *out = sw::Layout::canonical(shape);
    return 0;
  } catch (const std::invalid_argument& e) {
    PyErr_Format(PyExc_ValueError, "%s(): shapes %R and %R are not broadcast-compatible (%s)", op,
                 reinterpret_cast<LayoutObject*>(as_tensor(a.tensor)->layout)->shape,
                 reinterpret_cast<LayoutObject*>(as_tensor(b.tensor)->layout)->shape, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  }
  return -1;
}

// Iteration leaves that sum a cotangent over g's extents onto x's gradient
// layout gl: gl's strides, 0 on leaves x has at extent 1 (its broadcast
// leaves). ValueError when the shapes cannot correspond.
int reduce_leaves(const sw::Layout& g, const sw::Layout& x, const sw::Layout& gl, const char* op, Leaves* out) {
  const Leaves& lg = g.leaves();
  const Leaves& lx = x.leaves();
  if (lg.size() != lx.size() || !sw::congruent(g.shape(), x.shape())) {
    PyErr_Format(PyExc_ValueError, "%s backward: the gradient's shape does not match the input's shape", op);
    return -1;
  }
  out->clear();
  for (size_t d = 0; d < lg.size(); ++d) {
    if (lx[d].extent != lg[d].extent && lx[d].extent != 1) {
      PyErr_Format(PyExc_ValueError, "%s backward: the gradient's shape does not match the input's shape", op);
      return -1;
    }
    out->push_back({lg[d].extent, lx[d].extent == 1 ? 0 : gl.leaves()[d].stride});
  }
  return 0;
}

// ------------------------------------------------------------ native op types

struct MulOperationObject {
  OperationObject base;
  PyObject* scalar;  // the Python number of mul(t, number); NULL for mul(a, b)
};

PyTypeObject BroadcastToOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.BroadcastToOperation",
                                          sizeof(OperationObject)};
PyTypeObject AddOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.AddOperation",
                                  sizeof(OperationObject)};
PyTypeObject MulOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.MulOperation",
                                  sizeof(MulOperationObject)};
PyTypeObject ReluOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.ReluOperation",
                                   sizeof(OperationObject)};
PyTypeObject ReduceSumOperation_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "strideweave.ReduceSumOperation",
                                        sizeof(OperationObject)};

// The saved inputs a backward needs, or RuntimeError.
PyObject* saved_inputs(PyObject* self, Py_ssize_t n, const char* op) {
  OperationObject* o = reinterpret_cast<OperationObject*>(self);
  if (!o->inputs) {
    if (o->graph_freed)
      PyErr_Format(PyExc_RuntimeError,
                   "%s backward: the graph was freed by an earlier backward pass; pass retain_graph=True to "
                   "backward more than once",
                   op);
    else
      PyErr_Format(PyExc_RuntimeError, "%s backward: no forward pass was recorded", op);
    return nullptr;
  }
  if (PyTuple_GET_SIZE(o->inputs) != n) {
    PyErr_Format(PyExc_RuntimeError, "%s backward: expected %zd saved inputs, found %zd", op, n,
                 PyTuple_GET_SIZE(o->inputs));
    return nullptr;
  }
  return o->inputs;
}

bool differentiable(PyObject* t) { return as_tensor(t)->dtype && dtype_is_differentiable(as_tensor(t)->dtype); }

// Gradient for x by summing cotangent g onto x's gradient layout (a plain
// relayout when no leaf was broadcast; g itself when it already has it).
PyObject* reduce_to(const Operand& g, PyObject* xt, const char* op) {
  const sw::Layout& xl = layout_of(as_tensor(xt)->layout);
  sw::Layout gl;
  Leaves lo;
  try {
    gl = grad_layout_for(xl);
  } catch (const std::exception&) {
    PyErr_NoMemory();
    return nullptr;
  }
  if (g.L() == gl) return Py_NewRef(g.tensor);
  if (reduce_leaves(g.L(), xl, gl, op, &lo) < 0) return nullptr;
  PyObject* lobj = (gl == xl) ? as_tensor(xt)->layout : nullptr;
  const int64_t cos = gl.cosize();
  if (g.host_f32()) {
    bool reduce = false;
    for (size_t d = 0; d < lo.size(); ++d)
      if (lo[d].stride == 0 && lo[d].extent > 1) reduce = true;
    void* out;
    PyObject* c = alloc_host(g.carrier, cos, DTypeCode::Float32, !reduce && cos != gl.size(), &out);
    if (!c) return nullptr;
    if (guarded(op, [&] {
          // A plain relayout copies; only broadcast leaves need the summing pass.
          if (reduce)
            K::broadcast_sum_backward(static_cast<const float*>(g.at()), g.L().leaves(), static_cast<float*>(out),
                                      lo, cos);
          else
            K::copy(DTypeCode::Float32, g.at(), g.L().leaves(), out, lo);
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, gl, lobj);
  }
  std::vector<int64_t> ig, io;
  if (index_list(g.L().leaves(), ig) < 0 || index_list(lo, io) < 0) return nullptr;
  PyObject* list = zero_list(DTypeCode::Floating, cos);
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k) {
    if (list_accumulate(list, io[k], get_slot(g, ig[k])) < 0) { Py_DECREF(list); return nullptr; }
  }
  PyObject* c = carrier_new_like(g.carrier, list, true, nullptr);
  Py_DECREF(list);
  return wrap(c, gl, lobj);
}

// The cotangent argument of a native backward.
int cotangent_operand(PyObject* g, const char* op, Operand* o) {
  char name[64];
  std::snprintf(name, sizeof name, "%s backward", op);
  if (view_operand(g, name, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  if (!dtype_is_differentiable(as_tensor(g)->dtype)) {
    PyErr_Format(PyExc_TypeError, "%s: the gradient must be Float32 or Floating, not %s", name, dtype_name_of(g));
    return -1;
  }
  return 0;
}

// A saved input read at backward time.
int saved_operand(PyObject* t, const char* op, Operand* o) {
  char name[64];
  std::snprintf(name, sizeof name, "%s backward", op);
  if (view_operand(t, name, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  return 0;
}

PyObject* pair_or_none(PyObject* a, PyObject* b) {
  PyObject* r = PyTuple_New(2);
  if (!r) { Py_XDECREF(a); Py_XDECREF(b); return nullptr; }
  PyTuple_SET_ITEM(r, 0, a ? a : Py_NewRef(Py_None));
  PyTuple_SET_ITEM(r, 1, b ? b : Py_NewRef(Py_None));
  return r;
}

PyObject* single(PyObject* a) {
  if (!a) return nullptr;
  PyObject* r = PyTuple_New(1);
  if (!r) { Py_DECREF(a); return nullptr; }
  PyTuple_SET_ITEM(r, 0, a);
  return r;
}

// ---------------------------------------------------------------- broadcast_to

PyObject* BroadcastTo_forward(PyObject*, PyObject* args) {
  PyObject *t, *shape;
  if (!PyArg_UnpackTuple(args, "broadcast_to", 2, 2, &t, &shape)) return nullptr;
  Operand a;
  if (view_operand(t, "broadcast_to", &a) < 0) return nullptr;
  if (!PyObject_TypeCheck(shape, &Shape_Type)) {
    PyErr_Format(PyExc_TypeError, "broadcast_to() expects a Shape, not %.100s", Py_TYPE(shape)->tp_name);
    return nullptr;
  }
  PyObject* lobj = nullptr;
  try {
    lobj = layout_from_engine(a.L().broadcast_to(tree_of(shape)));
  } catch (const std::invalid_argument& e) {
    PyErr_Format(PyExc_ValueError, "broadcast_to(): %s", e.what());
    return nullptr;
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  if (!lobj) return nullptr;
  PyObject* r = tensor_new(a.carrier, a.offset, lobj);
  Py_DECREF(lobj);
  // A view keeps the source's logical dtype (a one-plane compound dtype is
  // not its carrier's dtype).
  if (r) Py_SETREF(as_tensor(r)->dtype, Py_NewRef(as_tensor(t)->dtype));
  return r;
}

PyObject* BroadcastTo_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "broadcast_to");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "broadcast_to", &go) < 0) return nullptr;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (!differentiable(x)) return single(Py_NewRef(Py_None));
  return single(reduce_to(go, x, "broadcast_to"));
}

// ---------------------------------------------------------------- add / mul

enum class Binary { Add, Mul };

PyObject* binary_forward(Binary kind, const Operand& a, const Operand& b, const char* op) {
  sw::Layout out;
  Leaves la, lb;
  if (broadcast_pair(a, b, op, &out, &la, &lb) < 0) return nullptr;
  const int64_t n = out.size();
  if (a.host && b.host) {
    void* data;
    PyObject* c = alloc_host(a.carrier, n, a.dtype, false, &data);
    if (!c) return nullptr;
    if (guarded(op, [&] {
          if (kind == Binary::Add) K::add(a.dtype, a.at(), la, b.at(), lb, data, out.leaves());
          else K::mul(a.dtype, a.at(), la, b.at(), lb, data, out.leaves());
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, out, nullptr);
  }
  std::vector<int64_t> ia, ib;
  if (index_list(la, ia) < 0 || index_list(lb, ib) < 0) return nullptr;
  PyObject* list = PyList_New(n);
  if (!list) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    PyObject* va = get_slot(a, ia[k]);
    PyObject* vb = va ? get_slot(b, ib[k]) : nullptr;
    PyObject* v = vb ? (kind == Binary::Add ? PyNumber_Add(va, vb) : PyNumber_Multiply(va, vb)) : nullptr;
    Py_XDECREF(va);
    Py_XDECREF(vb);
    if (!v) { Py_DECREF(list); return nullptr; }
    PyList_SET_ITEM(list, k, v);
  }
  PyObject* c = carrier_new_like(a.carrier, list, true, nullptr);
  Py_DECREF(list);
  return wrap(c, out, nullptr);
}

PyObject* Add_forward(PyObject*, PyObject* args) {
  PyObject *x, *y;
  if (!PyArg_UnpackTuple(args, "add", 2, 2, &x, &y)) return nullptr;
  Operand a, b;
  if (compute_operand(x, "add", &a) < 0 || compute_operand(y, "add", &b) < 0 || check_pair(a, b, "add") < 0)
    return nullptr;
  return binary_forward(Binary::Add, a, b, "add");
}

PyObject* Add_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 2, "add");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "add", &go) < 0) return nullptr;
  PyObject* ga = nullptr;
  PyObject* gb = nullptr;
  PyObject* a = PyTuple_GET_ITEM(in, 0);
  PyObject* b = PyTuple_GET_ITEM(in, 1);
  if (differentiable(a) && !(ga = reduce_to(go, a, "add"))) return nullptr;
  if (differentiable(b) && !(gb = reduce_to(go, b, "add"))) { Py_XDECREF(ga); return nullptr; }
  return pair_or_none(ga, gb);
}

bool is_scalar(PyObject* v) { return (PyLong_Check(v) && !PyBool_Check(v)) || PyFloat_Check(v); }

PyObject* scalar_forward(PyObject* self, const Operand& a, PyObject* s) {
  if (a.dtype == DTypeCode::Int32 && !PyLong_Check(s)) {
    PyErr_Format(PyExc_TypeError, "mul(): an Int32 tensor multiplies only by an int, not %.100s",
                 Py_TYPE(s)->tp_name);
    return nullptr;
  }
  Py_XSETREF(reinterpret_cast<MulOperationObject*>(self)->scalar, Py_NewRef(s));
  sw::Layout out;
  try {
    out = sw::Layout::canonical(a.L().shape());
  } catch (const std::exception&) {
    return PyErr_NoMemory();
  }
  const int64_t n = out.size();
  if (a.host) {
    double sd = 0;
    long long si = 0;
    if (a.dtype == DTypeCode::Float32) {
      sd = PyFloat_AsDouble(s);
      if (sd == -1.0 && PyErr_Occurred()) return nullptr;
    } else {
      int overflow = 0;
      si = PyLong_AsLongLongAndOverflow(s, &overflow);
      if (si == -1 && PyErr_Occurred()) return nullptr;
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "mul(): Int32 result out of range");
        return nullptr;
      }
    }
    void* data;
    PyObject* c = alloc_host(a.carrier, n, a.dtype, false, &data);
    if (!c) return nullptr;
    if (guarded("mul", [&] {
          if (a.dtype == DTypeCode::Float32)
            K::mul_scalar_f32(static_cast<const float*>(a.at()), a.L().leaves(), sd, static_cast<float*>(data),
                              out.leaves());
          else
            K::mul_scalar_i32(static_cast<const int32_t*>(a.at()), a.L().leaves(), si,
                              static_cast<int32_t*>(data), out.leaves());
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, out, nullptr);
  }
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  PyObject* list = PyList_New(n);
  if (!list) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    PyObject* va = get_slot(a, ia[k]);
    PyObject* v = va ? PyNumber_Multiply(va, s) : nullptr;
    Py_XDECREF(va);
    if (!v) { Py_DECREF(list); return nullptr; }
    PyList_SET_ITEM(list, k, v);
  }
  PyObject* c = carrier_new_like(a.carrier, list, true, nullptr);
  Py_DECREF(list);
  return wrap(c, out, nullptr);
}

PyObject* Mul_forward(PyObject* self, PyObject* args) {
  PyObject *x, *y;
  if (!PyArg_UnpackTuple(args, "mul", 2, 2, &x, &y)) return nullptr;
  Operand a, b;
  if (compute_operand(x, "mul", &a) < 0) return nullptr;
  if (!is_tensor(y)) {
    if (!is_scalar(y)) {
      PyErr_Format(PyExc_TypeError, "mul() expects a Tensor or a Python int/float as b, not %.100s",
                   Py_TYPE(y)->tp_name);
      return nullptr;
    }
    return scalar_forward(self, a, y);
  }
  if (compute_operand(y, "mul", &b) < 0 || check_pair(a, b, "mul") < 0) return nullptr;
  Py_CLEAR(reinterpret_cast<MulOperationObject*>(self)->scalar);
  return binary_forward(Binary::Mul, a, b, "mul");
}

// Gradient of x for mul: g * other (other broadcast over g's extents, or the
// scalar s when other is NULL), summed onto x's gradient layout.
PyObject* mul_grad(const Operand& g, PyObject* xt, const Operand* other, PyObject* s) {
  const sw::Layout& xl = layout_of(as_tensor(xt)->layout);
  sw::Layout gl;
  Leaves lo, ly;
  try {
    gl = grad_layout_for(xl);
    if (other) ly = other->L().broadcast_to(g.L().shape()).leaves();
  } catch (const std::invalid_argument& e) {
    PyErr_Format(PyExc_ValueError, "mul backward: %s", e.what());
    return nullptr;
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  if (reduce_leaves(g.L(), xl, gl, "mul", &lo) < 0) return nullptr;
  bool reduce = false;
  for (size_t d = 0; d < lo.size(); ++d)
    if (xl.leaves()[d].extent != g.L().leaves()[d].extent) reduce = true;
  if (reduce && !other) {
    PyErr_SetString(PyExc_ValueError, "mul backward: the gradient's shape does not match the input's shape");
    return nullptr;
  }
  PyObject* lobj = (gl == xl) ? as_tensor(xt)->layout : nullptr;
  const int64_t cos = gl.cosize();
  if (g.host_f32() && (other ? other->host_f32() : true)) {
    double sd = 0;
    if (!other) {
      sd = PyFloat_AsDouble(s);
      if (sd == -1.0 && PyErr_Occurred()) return nullptr;
    }
    void* out;
    PyObject* c = alloc_host(g.carrier, cos, DTypeCode::Float32, cos != gl.size(), &out);
    if (!c) return nullptr;
    if (guarded("mul", [&] {
          const float* gp = static_cast<const float*>(g.at());
          float* op = static_cast<float*>(out);
          if (!reduce) {
            if (other) K::mul(DTypeCode::Float32, gp, g.L().leaves(), other->at(), ly, op, lo);
            else K::mul_scalar_f32(gp, g.L().leaves(), sd, op, lo);
            return;
          }
          const Leaves compact = K::compact_of(g.L().leaves());
          std::vector<float> tmp(static_cast<size_t>(K::element_count(compact)));
          K::mul(DTypeCode::Float32, gp, g.L().leaves(), other->at(), ly, tmp.data(), compact);
          K::broadcast_sum_backward(tmp.data(), compact, op, lo, cos);
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, gl, lobj);
  }
  std::vector<int64_t> ig, iy, io;
  if (index_list(g.L().leaves(), ig) < 0 || index_list(lo, io) < 0) return nullptr;
  if (other && index_list(ly, iy) < 0) return nullptr;
  PyObject* list = zero_list(DTypeCode::Floating, cos);
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k) {
    PyObject* gv = get_slot(g, ig[k]);
    PyObject* yv = gv ? (other ? get_slot(*other, iy[k]) : Py_NewRef(s)) : nullptr;
    PyObject* v = yv ? PyNumber_Multiply(gv, yv) : nullptr;
    Py_XDECREF(gv);
    Py_XDECREF(yv);
    if (list_accumulate(list, io[k], v) < 0) { Py_DECREF(list); return nullptr; }
  }
  PyObject* c = carrier_new_like(g.carrier, list, true, nullptr);
  Py_DECREF(list);
  return wrap(c, gl, lobj);
}

PyObject* Mul_backward(PyObject* self, PyObject* g) {
  PyObject* s = reinterpret_cast<MulOperationObject*>(self)->scalar;
  PyObject* in = saved_inputs(self, s ? 1 : 2, "mul");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "mul", &go) < 0) return nullptr;
  PyObject* a = PyTuple_GET_ITEM(in, 0);
  if (s) {
    if (!differentiable(a)) return single(Py_NewRef(Py_None));
    return single(mul_grad(go, a, nullptr, s));
  }
  PyObject* b = PyTuple_GET_ITEM(in, 1);
  Operand ao, bo;
  if (saved_operand(a, "mul", &ao) < 0 || saved_operand(b, "mul", &bo) < 0) return nullptr;
  PyObject* ga = nullptr;
  PyObject* gb = nullptr;
  if (differentiable(a) && !(ga = mul_grad(go, a, &bo, nullptr))) return nullptr;
  if (differentiable(b) && !(gb = mul_grad(go, b, &ao, nullptr))) { Py_XDECREF(ga); return nullptr; }
  return pair_or_none(ga, gb);
}

int Mul_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<MulOperationObject*>(self)->scalar);
  return Operation_Type.tp_traverse(self, visit, arg);
}

int Mul_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<MulOperationObject*>(self)->scalar);
  return Operation_Type.tp_clear(self);
}

void Mul_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(reinterpret_cast<MulOperationObject*>(self)->scalar);
  Operation_Type.tp_dealloc(self);
}

// ---------------------------------------------------------------- relu

PyObject* Relu_forward(PyObject*, PyObject* args) {
  PyObject* x;
  if (!PyArg_UnpackTuple(args, "relu", 1, 1, &x)) return nullptr;
  Operand a;
  if (compute_operand(x, "relu", &a) < 0) return nullptr;
  sw::Layout out;
  try {
    out = sw::Layout::canonical(a.L().shape());
  } catch (const std::exception&) {
    return PyErr_NoMemory();
  }
  const int64_t n = out.size();
  if (a.host) {
    void* data;
    PyObject* c = alloc_host(a.carrier, n, a.dtype, false, &data);
    if (!c) return nullptr;
    if (guarded("relu", [&] { K::relu(a.dtype, a.at(), a.L().leaves(), data, out.leaves()); }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, out, nullptr);
  }
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  PyObject* zero = PyLong_FromLong(0);
  PyObject* list = zero ? PyList_New(n) : nullptr;
  if (!list) { Py_XDECREF(zero); return nullptr; }
  for (int64_t k = 0; k < n; ++k) {
    PyObject* v = get_slot(a, ia[k]);
    if (!v) goto error;
    {
      int pos = (PyFloat_Check(v) && std::isnan(PyFloat_AS_DOUBLE(v))) ? 1 : PyObject_RichCompareBool(v, zero, Py_GT);
      if (pos < 0) { Py_DECREF(v); goto error; }
      if (!pos) {
        Py_DECREF(v);
        v = value_zero(a.dtype);
        if (!v) goto error;
      }
      PyList_SET_ITEM(list, k, v);
    }
  }
  Py_DECREF(zero);
  {
    PyObject* c = carrier_new_like(a.carrier, list, true, nullptr);
    Py_DECREF(list);
    return wrap(c, out, nullptr);
  }
error:
  Py_DECREF(zero);
  Py_DECREF(list);
  return nullptr;
}

PyObject* Relu_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "relu");
  if (!in) return nullptr;
  Operand go, xo;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (cotangent_operand(g, "relu", &go) < 0 || saved_operand(x, "relu", &xo) < 0) return nullptr;
  if (!differentiable(x)) return single(Py_NewRef(Py_None));
  if (!(go.L().shape() == xo.L().shape())) {
    PyErr_SetString(PyExc_ValueError, "relu backward: the gradient's shape does not match the input's shape");
    return nullptr;
  }
  sw::Layout gl;
  try {
    gl = grad_layout_for(xo.L());
  } catch (const std::exception&) {
    return PyErr_NoMemory();
  }
  PyObject* lobj = (gl == xo.L()) ? as_tensor(x)->layout : nullptr;
  const int64_t cos = gl.cosize();
  if (go.host_f32() && xo.host_f32()) {
    void* out;
    PyObject* c = alloc_host(go.carrier, cos, DTypeCode::Float32, cos != gl.size(), &out);
    if (!c) return nullptr;
    if (guarded("relu", [&] {
          K::relu_backward(static_cast<const float*>(go.at()), go.L().leaves(), static_cast<const float*>(xo.at()),
                           xo.L().leaves(), static_cast<float*>(out), gl.leaves());
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return single(wrap(c, gl, lobj));
  }
  std::vector<int64_t> ig, ix, io;
  if (index_list(go.L().leaves(), ig) < 0 || index_list(xo.L().leaves(), ix) < 0 ||
      index_list(gl.leaves(), io) < 0)
    return nullptr;
  PyObject* zero = PyLong_FromLong(0);
  PyObject* list = zero ? zero_list(DTypeCode::Floating, cos) : nullptr;
  if (!list) { Py_XDECREF(zero); return nullptr; }
  for (size_t k = 0; k < ig.size(); ++k) {
    PyObject* xv = get_slot(xo, ix[k]);
    int pos = xv ? PyObject_RichCompareBool(xv, zero, Py_GT) : -1;
    Py_XDECREF(xv);
    if (pos < 0) { Py_DECREF(zero); Py_DECREF(list); return nullptr; }
    if (!pos) continue;  // the slot keeps its zero
    PyObject* gv = get_slot(go, ig[k]);
    if (!gv) { Py_DECREF(zero); Py_DECREF(list); return nullptr; }
    list_store(list, io[k], gv);
  }
  Py_DECREF(zero);
  PyObject* c = carrier_new_like(go.carrier, list, true, nullptr);
  Py_DECREF(list);
  return single(wrap(c, gl, lobj));
}

// ---------------------------------------------------------------- reduce_sum

PyObject* ReduceSum_forward(PyObject*, PyObject* args) {
  PyObject* x;
  if (!PyArg_UnpackTuple(args, "reduce_sum", 1, 1, &x)) return nullptr;
  Operand a;
  if (compute_operand(x, "reduce_sum", &a) < 0) return nullptr;
  sw::Layout out;
  try {
    out = sw::Layout::canonical(sw::IntTree::node({}));
  } catch (const std::exception&) {
    return PyErr_NoMemory();
  }
  if (a.host) {
    void* data;
    PyObject* c = alloc_host(a.carrier, 1, a.dtype, false, &data);
    if (!c) return nullptr;
    if (guarded("reduce_sum", [&] {
          if (a.dtype == DTypeCode::Float32) {
            *static_cast<float*>(data) =
                static_cast<float>(K::sum_f32(static_cast<const float*>(a.at()), a.L().leaves()));
          } else {
            const int64_t s = K::sum_i32(static_cast<const int32_t*>(a.at()), a.L().leaves());
            if (s < INT32_MIN || s > INT32_MAX) throw std::overflow_error("sum");
            *static_cast<int32_t*>(data) = static_cast<int32_t>(s);
          }
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return wrap(c, out, nullptr);
  }
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  PyObject* acc = get_slot(a, ia[0]);
  for (size_t k = 1; acc && k < ia.size(); ++k) {
    PyObject* v = get_slot(a, ia[k]);
    PyObject* s = v ? PyNumber_Add(acc, v) : nullptr;
    Py_XDECREF(v);
    Py_SETREF(acc, s);
  }
  if (!acc) return nullptr;
  PyObject* list = PyList_New(1);
  if (!list) { Py_DECREF(acc); return nullptr; }
  PyList_SET_ITEM(list, 0, acc);
  PyObject* c = carrier_new_like(a.carrier, list, true, nullptr);
  Py_DECREF(list);
  return wrap(c, out, nullptr);
}

PyObject* ReduceSum_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "reduce_sum");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "reduce_sum", &go) < 0) return nullptr;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (!differentiable(x)) return single(Py_NewRef(Py_None));
  if (go.L().size() != 1) {
    PyErr_SetString(PyExc_ValueError, "reduce_sum backward: the gradient must hold exactly one element");
    return nullptr;
  }
  const sw::Layout& xl = layout_of(as_tensor(x)->layout);
  sw::Layout gl;
  try {
    gl = grad_layout_for(xl);
  } catch (const std::exception&) {
    return PyErr_NoMemory();
  }
  PyObject* lobj = (gl == xl) ? as_tensor(x)->layout : nullptr;
  const int64_t cos = gl.cosize();
  const int64_t g0 = go.L().index_of_ordinal(0);
  Leaves fill;
  for (const auto& m : gl.leaves()) fill.push_back({m.extent, 0});
  if (go.host_f32()) {
    void* out;
    PyObject* c = alloc_host(go.carrier, cos, DTypeCode::Float32, cos != gl.size(), &out);
    if (!c) return nullptr;
    if (guarded("reduce_sum", [&] {
          K::copy(DTypeCode::Float32, static_cast<const float*>(go.at()) + g0, fill, out, gl.leaves());
        }) < 0) {
      Py_DECREF(c);
      return nullptr;
    }
    return single(wrap(c, gl, lobj));
  }
  std::vector<int64_t> io;
  if (index_list(gl.leaves(), io) < 0) return nullptr;
  PyObject* v = get_slot(go, g0);
  PyObject* list = v ? zero_list(DTypeCode::Floating, cos) : nullptr;
  if (!list) { Py_XDECREF(v); return nullptr; }
  for (int64_t slot : io) list_store(list, slot, Py_NewRef(v));
  Py_DECREF(v);
  PyObject* c = carrier_new_like(go.carrier, list, true, nullptr);
  Py_DECREF(list);
  return single(wrap(c, gl, lobj));
}

// ---------------------------------------------------------------- type setup

PyMethodDef BroadcastTo_methods[] = {
    {"_forward", BroadcastTo_forward, METH_VARARGS, "_forward(t, shape): a stride-0 view of t widened to shape."},
    {"backward", BroadcastTo_backward, METH_O, "Sums the cotangent back onto the source layout."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Add_methods[] = {
    {"_forward", Add_forward, METH_VARARGS, "_forward(a, b): elementwise sum with broadcasting."},
    {"backward", Add_backward, METH_O, "Passes the cotangent to both inputs (summed over broadcast leaves)."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Mul_methods[] = {
    {"_forward", Mul_forward, METH_VARARGS, "_forward(a, b): elementwise product; b may be an int or float."},
    {"backward", Mul_backward, METH_O, "g*b and g*a, reading the saved inputs from storage now."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Relu_methods[] = {
    {"_forward", Relu_forward, METH_VARARGS, "_forward(t): max(0, x) elementwise (NaN stays NaN)."},
    {"backward", Relu_backward, METH_O, "g where x > 0, else 0."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef ReduceSum_methods[] = {
    {"_forward", ReduceSum_forward, METH_VARARGS, "_forward(t): rank-0 tensor holding the sum of all values."},
    {"backward", ReduceSum_backward, METH_O, "Broadcasts the one-element cotangent back to the input's shape."},
    {nullptr, nullptr, 0, nullptr}};

int ready_op(PyObject* module, PyTypeObject* type, const char* name, const char* op_name, PyMethodDef* methods,
             const char* doc) {
  type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  type->tp_base = &Operation_Type;
  if (!type->tp_traverse) type->tp_traverse = Operation_Type.tp_traverse;
  if (!type->tp_clear) type->tp_clear = Operation_Type.tp_clear;
  type->tp_methods = methods;
  type->tp_doc = doc;
  if (add_type(module, type, name) < 0) return -1;
  PyObject* n = PyUnicode_FromString(op_name);
  if (!n) return -1;
  int rc = PyDict_SetItemString(type->tp_dict, "op_name", n);
  Py_DECREF(n);
  PyType_Modified(type);
  return rc;
}

// ---------------------------------------------------------------- module functions

// Creates a node of type and runs Operation.forward with args.
PyObject* run_op(PyTypeObject* type, PyObject* args) {
  PyObject* op = type->tp_alloc(type, 0);
  if (!op) return nullptr;
  PyObject* r = operation_forward(op, args);
  Py_DECREF(op);
  return r;
}

PyObject* mod_broadcast_to(PyObject*, PyObject* args) {
  if (PyTuple_GET_SIZE(args) != 2) {
    PyErr_Format(PyExc_TypeError, "broadcast_to() takes 2 arguments (t, shape), got %zd", PyTuple_GET_SIZE(args));
    return nullptr;
  }
  return run_op(&BroadcastToOperation_Type, args);
}

PyObject* mod_add(PyObject*, PyObject* args) {
  if (PyTuple_GET_SIZE(args) != 2) {
    PyErr_Format(PyExc_TypeError, "add() takes 2 arguments (a, b), got %zd", PyTuple_GET_SIZE(args));
    return nullptr;
  }
  return run_op(&AddOperation_Type, args);
}

PyObject* mul_args(PyObject* a, PyObject* b) {
  // mul(number, tensor) is mul(tensor, number): the product commutes.
  if (!is_tensor(a) && is_tensor(b) && is_scalar(a)) return PyTuple_Pack(2, b, a);
  return PyTuple_Pack(2, a, b);
}

PyObject* mod_mul(PyObject*, PyObject* args) {
  if (PyTuple_GET_SIZE(args) != 2) {
    PyErr_Format(PyExc_TypeError, "mul() takes 2 arguments (a, b), got %zd", PyTuple_GET_SIZE(args));
    return nullptr;
  }
  PyObject* t = mul_args(PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1));
  if (!t) return nullptr;
  PyObject* r = run_op(&MulOperation_Type, t);
  Py_DECREF(t);
  return r;
}

PyObject* mod_relu(PyObject*, PyObject* t) {
  PyObject* args = PyTuple_Pack(1, t);
  if (!args) return nullptr;
  PyObject* r = run_op(&ReluOperation_Type, args);
  Py_DECREF(args);
  return r;
}

PyObject* mod_reduce_sum(PyObject*, PyObject* t) {
  PyObject* args = PyTuple_Pack(1, t);
  if (!args) return nullptr;
  PyObject* r = run_op(&ReduceSumOperation_Type, args);
  Py_DECREF(args);
  return r;
}

PyMethodDef module_methods[] = {
    {"broadcast_to", mod_broadcast_to, METH_VARARGS,
     "broadcast_to(t, shape) -> Tensor: a stride-0 view of t on the same carrier (Layout.broadcast_to rules)."},
    {"add", mod_add, METH_VARARGS,
     "add(a, b) -> Tensor: elementwise sum of CPU or Generic tensors of one class and dtype; extent-1 leaves "
     "broadcast. Fresh compact storage."},
    {"mul", mod_mul, METH_VARARGS,
     "mul(a, b) -> Tensor: elementwise product; b may be a Python int or float. Fresh compact storage."},
    {"relu", mod_relu, METH_O, "relu(t) -> Tensor: max(0, x) elementwise. Fresh compact storage."},
    {"reduce_sum", mod_reduce_sum, METH_O,
     "reduce_sum(t) -> Tensor: rank-0 (Shape()) tensor holding the sum of all logical values."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyObject* ops_alloc_host(PyObject* like, Py_ssize_t n, sw::DTypeCode dtype, bool zero, void** data) {
  return alloc_host(like, n, dtype, zero, data);
}

PyObject* tensor_add(PyObject* a, PyObject* b) {
  if (!is_tensor(a) || !is_tensor(b)) Py_RETURN_NOTIMPLEMENTED;
  PyObject* args = PyTuple_Pack(2, a, b);
  if (!args) return nullptr;
  PyObject* r = run_op(&AddOperation_Type, args);
  Py_DECREF(args);
  return r;
}

PyObject* tensor_mul(PyObject* a, PyObject* b) {
  const bool ok = (is_tensor(a) && (is_tensor(b) || is_scalar(b))) || (is_tensor(b) && is_scalar(a));
  if (!ok) Py_RETURN_NOTIMPLEMENTED;
  PyObject* args = mul_args(a, b);
  if (!args) return nullptr;
  PyObject* r = run_op(&MulOperation_Type, args);
  Py_DECREF(args);
  return r;
}

PyObject* tensor_neg(PyObject* a) {
  PyObject* m1 = PyLong_FromLong(-1);
  if (!m1) return nullptr;
  PyObject* args = PyTuple_Pack(2, a, m1);
  Py_DECREF(m1);
  if (!args) return nullptr;
  PyObject* r = run_op(&MulOperation_Type, args);
  Py_DECREF(args);
  return r;
}

int ops_module_init(PyObject* module) {
  MulOperation_Type.tp_traverse = Mul_traverse;
  MulOperation_Type.tp_clear = Mul_clear;
  MulOperation_Type.tp_dealloc = Mul_dealloc;
  if (ready_op(module, &BroadcastToOperation_Type, "BroadcastToOperation", "broadcast_to", BroadcastTo_methods,
               "Node of broadcast_to(t, shape).") < 0 ||
      ready_op(module, &AddOperation_Type, "AddOperation", "add", Add_methods, "Node of add(a, b).") < 0 ||
      ready_op(module, &MulOperation_Type, "MulOperation", "mul", Mul_methods, "Node of mul(a, b).") < 0 ||
      ready_op(module, &ReluOperation_Type, "ReluOperation", "relu", Relu_methods, "Node of relu(t).") < 0 ||
      ready_op(module, &ReduceSumOperation_Type, "ReduceSumOperation", "reduce_sum", ReduceSum_methods,
               "Node of reduce_sum(t).") < 0)
    return -1;
  return PyModule_AddFunctions(module, module_methods);
}

}  // namespace swpy

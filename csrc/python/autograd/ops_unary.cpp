// broadcast_to, relu and reduce_sum: forward and backward.
//
// Decisions where the contract is silent: reduce_sum returns a rank-0
// tensor (Layout(Shape(), Stride()), like NumPy and PyTorch); Bool tensors
// are rejected (TypeError); relu keeps NaN and its backward is g where
// x > 0 else 0.
#include <cmath>

#include "autograd/ops_support.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "util/ref.hpp"

namespace swpy::ops {

namespace {

// ---------------------------------------------------------------- broadcast_to

PyObject* BroadcastTo_forward(PyObject*, PyObject* args) {
  PyObject *t, *shape;
  if (!PyArg_UnpackTuple(args, "broadcast_to", 2, 2, &t, &shape)) return nullptr;
  Operand a;
  if (view_operand(t, "broadcast_to", &a) < 0) return nullptr;
  // The tiled spec accepts a raw TiledEvictable tensor only in add, mul,
  // relu and reduce_sum; a view of it would not be tile-footprint compatible.
  if (is_tiled_carrier(a.carrier)) {
    PyErr_SetString(PyExc_TypeError,
                    "broadcast_to() does not take a TiledEvictable tensor (only add, mul, relu and reduce_sum take "
                    "one directly): project() its tiles into a compact tensor first");
    return nullptr;
  }
  if (!PyObject_TypeCheck(shape, &Shape_Type)) {
    PyErr_Format(PyExc_TypeError, "broadcast_to() expects a Shape, not %.100s", Py_TYPE(shape)->tp_name);
    return nullptr;
  }
  sw::Layout view;
  if (forward_call("broadcast_to", [&] { view = a.L().broadcast_to(tree_of(shape)); }) < 0) return nullptr;
  Ref lobj = Ref::steal(layout_from_engine(view));
  if (!lobj) return nullptr;
  PyObject* r = tensor_new(a.carrier, a.offset, lobj.get());
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

// ---------------------------------------------------------------- relu

// Values path of relu: Python comparison slot by slot.
PyObject* relu_values(const Operand& a, const sw::Layout& out) {
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  Ref zero = Ref::steal(PyLong_FromLong(0));
  if (!zero) return nullptr;
  const int64_t n = out.size();
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    Ref v = Ref::steal(get_slot(a, ia[k]));
    if (!v) return nullptr;
    const int pos = (PyFloat_Check(v.get()) && std::isnan(PyFloat_AS_DOUBLE(v.get())))
                        ? 1
                        : PyObject_RichCompareBool(v.get(), zero.get(), Py_GT);
    if (pos < 0) return nullptr;
    if (!pos) {
      v = Ref::steal(value_zero(a.dtype));
      if (!v) return nullptr;
    }
    PyList_SET_ITEM(list.get(), k, v.release());
  }
  return wrap(carrier_new_like(a.carrier, list.get(), true, nullptr), out, nullptr);
}

PyObject* Relu_forward(PyObject*, PyObject* args) {
  PyObject* x;
  if (!PyArg_UnpackTuple(args, "relu", 1, 1, &x)) return nullptr;
  Operand a;
  if (compute_operand(x, "relu", &a) < 0 || ready_operands(&a, nullptr, "relu") < 0) return nullptr;
  sw::Layout out;
  if (forward_call("relu", [&] { out = sw::ops::unary_out(a.L()); }) < 0) return nullptr;
  if (!a.host) return relu_values(a, out);
  return host_forward("relu", a, out,
                      [&](void* data) { K::relu(a.dtype, a.at(), a.L().leaves(), data, out.leaves()); });
}

PyObject* Relu_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "relu");
  if (!in) return nullptr;
  Operand go, xo;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (cotangent_operand(g, "relu", &go) < 0) return nullptr;
  if (!differentiable(x)) {
    if (saved_operand(x, "relu", &xo) < 0) return nullptr;
    return single(Py_NewRef(Py_None));
  }
  if (saved_operand(x, "relu", &xo) < 0) return nullptr;
  Ref tiled;  // a tiled input read tile by tile (ops_tiled_bands.cpp)
  if (tiled_relu_grad(go, x, &tiled)) return single(input_gradient(x, tiled.release(), "relu", true));
  if (saved_values(x, "relu", &xo) < 0) return nullptr;
  sw::ops::GradPlan p;
  if (backward_call("relu", [&] { p = sw::ops::plan_relu_grad(go.L(), xo.L()); }) < 0) return nullptr;
  PyObject* lobj = grad_layout_object(x, p.layout);
  if (go.host_f32() && xo.host_f32())
    return single(input_gradient(x, host_gradient("relu", go, p, lobj, [&](float* out) {
      sw::ops::relu_grad_host(p, static_cast<const float*>(go.at()), go.L().leaves(),
                              static_cast<const float*>(xo.at()), xo.L().leaves(), out);
    }), "relu", true));
  std::vector<int64_t> ig, ix, io;
  if (index_list(go.L().leaves(), ig) < 0 || index_list(xo.L().leaves(), ix) < 0 || index_list(p.target, io) < 0)
    return nullptr;
  Ref zero = Ref::steal(PyLong_FromLong(0));
  if (!zero) return nullptr;
  Ref list = Ref::steal(zero_list(DTypeCode::Floating, p.slots()));
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k) {
    Ref xv = Ref::steal(get_slot(xo, ix[k]));
    if (!xv) return nullptr;
    const int pos = PyObject_RichCompareBool(xv.get(), zero.get(), Py_GT);
    if (pos < 0) return nullptr;
    if (!pos) continue;  // the slot keeps its zero
    PyObject* gv = get_slot(go, ig[k]);
    if (!gv) return nullptr;
    list_store(list.get(), io[k], gv);
  }
  return single(input_gradient(x, wrap(carrier_new_like(go.carrier, list.get(), true, nullptr), p.layout, lobj),
                              "relu", true));
}

// ---------------------------------------------------------------- reduce_sum

PyObject* ReduceSum_forward(PyObject*, PyObject* args) {
  PyObject* x;
  if (!PyArg_UnpackTuple(args, "reduce_sum", 1, 1, &x)) return nullptr;
  Operand a;
  if (compute_operand(x, "reduce_sum", &a) < 0 || ready_operands(&a, nullptr, "reduce_sum") < 0) return nullptr;
  sw::Layout out;
  if (forward_call("reduce_sum", [&] { out = sw::ops::reduction_out(); }) < 0) return nullptr;
  if (a.host)
    return host_forward("reduce_sum", a, out,
                        [&](void* data) { K::reduce_sum(a.dtype, a.at(), a.L().leaves(), data); });
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  Ref acc = Ref::steal(get_slot(a, ia[0]));
  for (size_t k = 1; acc && k < ia.size(); ++k) {
    Ref v = Ref::steal(get_slot(a, ia[k]));
    acc = v ? Ref::steal(PyNumber_Add(acc.get(), v.get())) : Ref();
  }
  if (!acc) return nullptr;
  Ref list = Ref::steal(PyList_New(1));
  if (!list) return nullptr;
  PyList_SET_ITEM(list.get(), 0, acc.release());
  return wrap(carrier_new_like(a.carrier, list.get(), true, nullptr), out, nullptr);
}

PyObject* ReduceSum_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "reduce_sum");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "reduce_sum", &go) < 0) return nullptr;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (!differentiable(x)) return single(Py_NewRef(Py_None));
  sw::ops::FillPlan p;
  if (backward_call("reduce_sum",
                    [&] { p = sw::ops::plan_reduce_sum_grad(go.L(), layout_of(as_tensor(x)->layout)); }) < 0)
    return nullptr;
  PyObject* lobj = grad_layout_object(x, p.layout);
  if (go.host_f32())
    return single(input_gradient(x, host_gradient("reduce_sum", go, p, lobj, [&](float* out) {
      sw::ops::reduce_sum_grad_host(p, static_cast<const float*>(go.at()), out);
    }), "reduce_sum", true));
  std::vector<int64_t> io;
  if (index_list(p.target, io) < 0) return nullptr;
  Ref v = Ref::steal(get_slot(go, p.source));
  if (!v) return nullptr;
  Ref list = Ref::steal(zero_list(DTypeCode::Floating, p.slots()));
  if (!list) return nullptr;
  for (int64_t slot : io) list_store(list.get(), slot, v.new_ref());
  return single(input_gradient(x, wrap(carrier_new_like(go.carrier, list.get(), true, nullptr), p.layout, lobj),
                              "reduce_sum", true));
}

}  // namespace

PyMethodDef BroadcastTo_methods[] = {
    {"_forward", BroadcastTo_forward, METH_VARARGS, "_forward(t, shape): a stride-0 view of t widened to shape."},
    {"backward", BroadcastTo_backward, METH_O, "Sums the cotangent back onto the source layout."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Relu_methods[] = {
    {"_forward", Relu_forward, METH_VARARGS, "_forward(t): max(0, x) elementwise (NaN stays NaN)."},
    {"backward", Relu_backward, METH_O, "g where x > 0, else 0."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef ReduceSum_methods[] = {
    {"_forward", ReduceSum_forward, METH_VARARGS, "_forward(t): rank-0 tensor holding the sum of all values."},
    {"backward", ReduceSum_backward, METH_O, "Broadcasts the one-element cotangent back to the input's shape."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace swpy::ops

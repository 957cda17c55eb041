// add and mul: elementwise with broadcasting (mul also by a Python number),
// forward and backward.
//
// Decisions where the contract is silent: operands must share one carrier
// class and one dtype (TypeError); Int32 results out of range raise
// OverflowError on both storage paths; an Int32 tensor multiplies only by an
// int.
#include "autograd/ops_support.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

namespace {

using sw::ops::Binary;

// The engine's plan of a binary operation; shapes that do not broadcast are
// a ValueError naming both.
int broadcast_pair(const Operand& a, const Operand& b, const char* op, sw::ops::BinaryPlan* plan) {
  std::string why;
  const int r = engine_check(&why, [&] { *plan = sw::ops::plan_binary(a.L(), b.L()); });
  if (r > 0)
    PyErr_Format(PyExc_ValueError, "%s(): shapes %R and %R are not broadcast-compatible (%s)", op,
                 autograd::shape_obj(a.tensor), autograd::shape_obj(b.tensor), why.c_str());
  return r == 0 ? 0 : -1;
}

PyObject* binary_forward(Binary kind, Operand& a, Operand& b, const char* op) {
  sw::ops::BinaryPlan plan;
  // Shapes are checked before a tiled operand's tiles are read.
  if (broadcast_pair(a, b, op, &plan) < 0 || ready_operands(&a, &b, op) < 0) return nullptr;
  const int64_t n = plan.out.size();
  if (a.host && b.host)
    return host_forward(op, a, plan.out,
                        [&](void* data) { sw::ops::binary_host(kind, a.dtype, a.at(), b.at(), plan, data); });
  std::vector<int64_t> ia, ib;
  if (index_list(plan.a, ia) < 0 || index_list(plan.b, ib) < 0) return nullptr;
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    Ref va = Ref::steal(get_slot(a, ia[k]));
    if (!va) return nullptr;
    Ref vb = Ref::steal(get_slot(b, ib[k]));
    if (!vb) return nullptr;
    PyObject* v = kind == Binary::Add ? PyNumber_Add(va.get(), vb.get()) : PyNumber_Multiply(va.get(), vb.get());
    if (!v) return nullptr;
    PyList_SET_ITEM(list.get(), k, v);
  }
  return wrap(carrier_new_like(a.carrier, list.get(), true, nullptr), plan.out, nullptr);
}

// ---------------------------------------------------------------- add

PyObject* scalar_forward(Binary kind, PyObject* self, Operand& a, PyObject* s);

// _forward(a, b) of add and mul: b is a tensor (broadcast) or a number (kept
// on the node).
PyObject* tensor_or_number_forward(Binary kind, PyObject* self, PyObject* args) {
  const char* op = kind == Binary::Add ? "add" : "mul";
  PyObject *x, *y;
  if (!PyArg_UnpackTuple(args, op, 2, 2, &x, &y)) return nullptr;
  Operand a, b;
  if (compute_operand(x, op, &a) < 0) return nullptr;
  if (!is_tensor(y)) {
    if (!is_scalar(y)) {
      PyErr_Format(PyExc_TypeError, "%s() expects a Tensor or a Python int/float as b, not %.100s", op,
                   Py_TYPE(y)->tp_name);
      return nullptr;
    }
    return scalar_forward(kind, self, a, y);
  }
  if (compute_operand(y, op, &b) < 0 || check_pair(a, b, op) < 0) return nullptr;
  Py_CLEAR(reinterpret_cast<MulOperationObject*>(self)->scalar);
  return binary_forward(kind, a, b, op);
}

PyObject* Add_forward(PyObject* self, PyObject* args) { return tensor_or_number_forward(Binary::Add, self, args); }

PyObject* Add_backward(PyObject* self, PyObject* g) {
  const bool scalar = reinterpret_cast<MulOperationObject*>(self)->scalar != nullptr;
  PyObject* in = saved_inputs(self, scalar ? 1 : 2, "add");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "add", &go) < 0) return nullptr;
  PyObject* a = PyTuple_GET_ITEM(in, 0);
  if (scalar) {
    if (!differentiable(a)) return single(Py_NewRef(Py_None));
    return single(input_gradient(a, reduce_to(go, a, "add"), "add"));
  }
  PyObject* b = PyTuple_GET_ITEM(in, 1);
  Ref ga, gb;
  if (differentiable(a) && !(ga = Ref::steal(input_gradient(a, reduce_to(go, a, "add"), "add")))) return nullptr;
  if (differentiable(b) && !(gb = Ref::steal(input_gradient(b, reduce_to(go, b, "add"), "add")))) return nullptr;
  return pair_or_none(ga.release(), gb.release());
}

// ---------------------------------------------------------------- mul

// The scalar as the host kernels take it: a double (Float32) or an int64
// (Int32; out of int64 is out of the Int32 result range too). 0 / -1.
int scalar_value(DTypeCode dtype, PyObject* s, const char* op, double* sd, long long* si) {
  if (dtype == DTypeCode::Float32) {
    *sd = PyFloat_AsDouble(s);
    return (*sd == -1.0 && PyErr_Occurred()) ? -1 : 0;
  }
  Ref i = Ref::steal(PyNumber_Index(s));
  if (!i) return -1;
  int overflow = 0;
  *si = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
  if (*si == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    PyErr_Format(PyExc_OverflowError, "%s(): Int32 result out of range", op);
    return -1;
  }
  return 0;
}

// op(t, number) for mul and add: the number is kept on the node (backward
// of mul needs it; add's backward looks only at whether it is there).
PyObject* scalar_forward(Binary kind, PyObject* self, Operand& a, PyObject* s) {
  const char* op = kind == Binary::Add ? "add" : "mul";
  if (!sw::ops::scalar_fits(a.dtype, is_int_scalar(s))) {
    PyErr_Format(PyExc_TypeError, "%s(): an Int32 tensor %s, not %.100s", op,
                 kind == Binary::Add ? "adds only an int" : "multiplies only by an int", Py_TYPE(s)->tp_name);
    return nullptr;
  }
  if (ready_operands(&a, nullptr, op) < 0) return nullptr;
  Py_XSETREF(reinterpret_cast<MulOperationObject*>(self)->scalar, Py_NewRef(s));
  sw::Layout out;
  if (forward_call(op, [&] { out = sw::ops::unary_out(a.L()); }) < 0) return nullptr;
  const int64_t n = out.size();
  if (a.host) {
    double sd = 0;
    long long si = 0;
    if (scalar_value(a.dtype, s, op, &sd, &si) < 0) return nullptr;
    return host_forward(op, a, out, [&](void* data) {
      if (kind == Binary::Add)
        sw::ops::add_scalar_host(a.dtype, a.at(), a.L().leaves(), sd, si, data, out);
      else
        sw::ops::mul_scalar_host(a.dtype, a.at(), a.L().leaves(), sd, si, data, out);
    });
  }
  std::vector<int64_t> ia;
  if (index_list(a.L().leaves(), ia) < 0) return nullptr;
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    Ref va = Ref::steal(get_slot(a, ia[k]));
    if (!va) return nullptr;
    PyObject* v = kind == Binary::Add ? PyNumber_Add(va.get(), s) : PyNumber_Multiply(va.get(), s);
    if (!v) return nullptr;
    PyList_SET_ITEM(list.get(), k, v);
  }
  return wrap(carrier_new_like(a.carrier, list.get(), true, nullptr), out, nullptr);
}

PyObject* Mul_forward(PyObject* self, PyObject* args) { return tensor_or_number_forward(Binary::Mul, self, args); }

// Gradient of x for mul: g * other (other broadcast over g's extents, or the
// scalar s when other is NULL), summed onto x's gradient layout.
PyObject* mul_grad(const Operand& g, PyObject* xt, const Operand* other, PyObject* s) {
  sw::ops::MulGradPlan p;
  if (backward_call("mul", [&] {
        p = sw::ops::plan_mul_grad(g.L(), layout_of(as_tensor(xt)->layout), other ? &other->L() : nullptr);
      }) < 0)
    return nullptr;
  PyObject* lobj = grad_layout_object(xt, p.layout);
  if (g.host_f32() && (other ? other->host_f32() : true)) {
    double sd = 0;
    if (!other) {
      sd = PyFloat_AsDouble(s);
      if (sd == -1.0 && PyErr_Occurred()) return nullptr;
    }
    return host_gradient("mul", g, p, lobj, [&](float* out) {
      sw::ops::mul_grad_host(p, static_cast<const float*>(g.at()), g.L().leaves(),
                             other ? static_cast<const float*>(other->at()) : nullptr, sd, out);
    });
  }
  std::vector<int64_t> ig, iy, io;
  if (index_list(g.L().leaves(), ig) < 0 || index_list(p.target, io) < 0) return nullptr;
  if (other && index_list(p.other, iy) < 0) return nullptr;
  Ref list = Ref::steal(zero_list(DTypeCode::Floating, p.slots()));
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k) {
    Ref gv = Ref::steal(get_slot(g, ig[k]));
    if (!gv) return nullptr;
    Ref yv = other ? Ref::steal(get_slot(*other, iy[k])) : Ref::borrow(s);
    if (!yv) return nullptr;
    if (list_accumulate(list.get(), io[k], PyNumber_Multiply(gv.get(), yv.get())) < 0) return nullptr;
  }
  return wrap(carrier_new_like(g.carrier, list.get(), true, nullptr), p.layout, lobj);
}

// x's gradient g * other: tile by tile when other is a tiled input whose
// values that path reads, else from other's values (a tiled one
// materialized first).
PyObject* mul_input_grad(const Operand& g, PyObject* x, PyObject* other) {
  Ref tiled;
  if (tiled_mul_grad(g, x, other, &tiled)) return input_gradient(x, tiled.release(), "mul", true);
  Operand oo;
  if (saved_values(other, "mul", &oo) < 0) return nullptr;
  return input_gradient(x, mul_grad(g, x, &oo, nullptr), "mul", true);
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
    return single(input_gradient(a, mul_grad(go, a, nullptr, s), "mul", true));
  }
  PyObject* b = PyTuple_GET_ITEM(in, 1);
  Operand ao, bo;
  // Both inputs are checked before anything is computed; a tiled input's
  // values are read only when the other input's gradient needs them.
  const bool da = differentiable(a), db = differentiable(b);
  if (saved_operand(a, "mul", &ao) < 0 || saved_operand(b, "mul", &bo) < 0) return nullptr;
  Ref ga, gb;
  if (da && !(ga = Ref::steal(mul_input_grad(go, a, b)))) return nullptr;
  if (db && !(gb = Ref::steal(mul_input_grad(go, b, a)))) return nullptr;
  return pair_or_none(ga.release(), gb.release());
}

}  // namespace

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

PyMethodDef Add_methods[] = {
    {"_forward", Add_forward, METH_VARARGS,
     "_forward(a, b): elementwise sum with broadcasting; b may be an int or float."},
    {"backward", Add_backward, METH_O, "Passes the cotangent to both inputs (summed over broadcast leaves)."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Mul_methods[] = {
    {"_forward", Mul_forward, METH_VARARGS, "_forward(a, b): elementwise product; b may be an int or float."},
    {"backward", Mul_backward, METH_O, "g*b and g*a, reading the saved inputs from storage now."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace swpy::ops

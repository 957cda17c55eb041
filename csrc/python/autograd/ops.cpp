// The differentiable operations broadcast_to, add, mul, relu and reduce_sum
// as module functions and Tensor operators: each call creates a node of the
// operation's native Operation subclass and runs Operation.forward.
// The node types' forward and backward live in ops_binary.cpp and
// ops_unary.cpp; the shared machinery in ops_support.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/ops_support.hpp"
#include "dtype/info.hpp"
#include "dtype_object.hpp"
#include "layout/algebra.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace ops {

PyTypeObject BroadcastToOperation_Type = static_type("strideweave.BroadcastToOperation", sizeof(OperationObject));
// add(t, number) keeps its number like mul: both use MulOperation's object.
PyTypeObject AddOperation_Type = static_type("strideweave.AddOperation", sizeof(MulOperationObject));
PyTypeObject MulOperation_Type = static_type("strideweave.MulOperation", sizeof(MulOperationObject));
PyTypeObject ReluOperation_Type = static_type("strideweave.ReluOperation", sizeof(OperationObject));
PyTypeObject ReduceSumOperation_Type = static_type("strideweave.ReduceSumOperation", sizeof(OperationObject));

namespace {

int ready_op(PyObject* module, PyTypeObject* type, const char* name, const char* op_name, PyMethodDef* methods,
             const char* doc) {
  type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  type->tp_base = &Operation_Type;
  if (!type->tp_traverse) type->tp_traverse = Operation_Type.tp_traverse;
  if (!type->tp_clear) type->tp_clear = Operation_Type.tp_clear;
  type->tp_methods = methods;
  type->tp_doc = doc;
  if (add_type(module, type, name) < 0) return -1;
  Ref n = Ref::steal(PyUnicode_FromString(op_name));
  if (!n) return -1;
  int rc = PyDict_SetItemString(type->tp_dict, "op_name", n.get());
  PyType_Modified(type);
  return rc;
}

// Creates a node of type and runs Operation.forward with args.
PyObject* run_op(PyTypeObject* type, PyObject* args) {
  Ref op = Ref::steal(type->tp_alloc(type, 0));
  if (!op) return nullptr;
  return operation_forward(op.get(), args);
}

// Packs the arguments and runs a node of type.
template <class... Args>
PyObject* run_op_with(PyTypeObject* type, Args... args) {
  Ref packed = Ref::steal(PyTuple_Pack(sizeof...(Args), args...));
  if (!packed) return nullptr;
  return run_op(type, packed.get());
}

// mul(number, tensor) is mul(tensor, number): the product commutes.
PyObject* mul_args(PyObject* a, PyObject* b) {
  if (!is_tensor(a) && is_tensor(b) && is_scalar(a)) return PyTuple_Pack(2, b, a);
  return PyTuple_Pack(2, a, b);
}

int check_arity(PyObject* args, Py_ssize_t n, const char* usage) {
  if (PyTuple_GET_SIZE(args) == n) return 0;
  PyErr_Format(PyExc_TypeError, "%s, got %zd", usage, PyTuple_GET_SIZE(args));
  return -1;
}

PyObject* mod_broadcast_to(PyObject*, PyObject* args) {
  if (check_arity(args, 2, "broadcast_to() takes 2 arguments (t, shape)") < 0) return nullptr;
  return run_op(&BroadcastToOperation_Type, args);
}

PyObject* mod_add(PyObject*, PyObject* args) {
  if (check_arity(args, 2, "add() takes 2 arguments (a, b)") < 0) return nullptr;
  // add() takes tensors only (the contract); t + number is the operator's.
  for (Py_ssize_t i = 0; i < 2; ++i) {
    PyObject* x = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(x)) {
      PyErr_Format(PyExc_TypeError, "add() expects a Tensor, not %.100s (t + number adds a number)",
                   Py_TYPE(x)->tp_name);
      return nullptr;
    }
  }
  return run_op(&AddOperation_Type, args);
}

PyObject* mod_mul(PyObject*, PyObject* args) {
  if (check_arity(args, 2, "mul() takes 2 arguments (a, b)") < 0) return nullptr;
  Ref t = Ref::steal(mul_args(PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1)));
  if (!t) return nullptr;
  return run_op(&MulOperation_Type, t.get());
}

PyObject* mod_relu(PyObject*, PyObject* t) { return run_op_with(&ReluOperation_Type, t); }

PyObject* mod_reduce_sum(PyObject*, PyObject* t) { return run_op_with(&ReduceSumOperation_Type, t); }

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

}  // namespace ops

PyObject* ops_alloc_host(PyObject* like, Py_ssize_t n, sw::DTypeCode dtype, bool zero, void** data) {
  return ops::alloc_host(like, n, dtype, zero, data);
}

// ------------------------------------------------------------ operators
//
// The number protocol goes through the same operations (so autograd sees add
// and mul nodes): t - u is add(t, -u), s - t is add(-t, s), t / s is
// mul(t, 1 / s) (IEEE: a zero divisor gives inf or nan, as NumPy does). Two
// tensors of different rank are aligned at their trailing modes first, as
// NumPy broadcasts: the lower-rank one is viewed with extent-1 modes in
// front (t[None, ...]); the operation then widens extent-1 leaves.

namespace {

const std::vector<sw::IntTree>& modes_of(PyObject* t) { return layout_of(as_tensor(t)->layout).shape().children; }

// Whether NumPy's trailing alignment broadcasts a and b; ValueError naming
// both shapes (and sym, the operator) when not. 0 / -1.
int check_broadcast(PyObject* a, PyObject* b, const char* sym) {
  const std::vector<sw::IntTree>& ma = modes_of(a);
  const std::vector<sw::IntTree>& mb = modes_of(b);
  if (ma == mb) return 0;
  std::string why;
  const int r = engine_check(&why, [&] {
    std::vector<sw::IntTree> ea(ma), eb(mb);
    while (ea.size() < eb.size()) ea.insert(ea.begin(), sw::IntTree::leaf(1));
    while (eb.size() < ea.size()) eb.insert(eb.begin(), sw::IntTree::leaf(1));
    (void)sw::broadcast_shapes(sw::IntTree::node(std::move(ea)), sw::IntTree::node(std::move(eb)));
  });
  if (r <= 0) return r;
  Ref sa = Ref::steal(tensor_get_shape(a, nullptr));
  Ref sb = Ref::steal(tensor_get_shape(b, nullptr));
  if (!sa || !sb) return -1;
  PyErr_Format(PyExc_ValueError,
               "operands could not be broadcast together with shapes %R and %R in 'a %s b' (modes are aligned "
               "at the end and an extent-1 leaf widens; here %s)",
               sa.get(), sb.get(), sym, why.c_str());
  return -1;
}

// t viewed with leading extent-1 modes up to rank (t itself when it has
// that rank already).
PyObject* lift(PyObject* t, size_t rank) {
  const size_t have = modes_of(t).size();
  if (have >= rank) return Py_NewRef(t);
  std::vector<sw::SlicePart> key(rank - have, sw::SlicePart::new_axis());
  key.push_back(sw::SlicePart::ellipsis());
  return tensor_view(t, key, nullptr);
}

// op(a, b) of two tensors after the trailing alignment.
PyObject* tensors_op(PyTypeObject* type, PyObject* a, PyObject* b, const char* sym) {
  if (check_broadcast(a, b, sym) < 0) return nullptr;
  const size_t rank = std::max(modes_of(a).size(), modes_of(b).size());
  Ref la = Ref::steal(lift(a, rank));
  if (!la) return nullptr;
  Ref lb = Ref::steal(lift(b, rank));
  if (!lb) return nullptr;
  return ops::run_op_with(type, la.get(), lb.get());
}

// op(t, number).
PyObject* scalar_op(PyTypeObject* type, PyObject* t, PyObject* s) { return ops::run_op_with(type, t, s); }

}  // namespace

PyObject* tensor_add(PyObject* a, PyObject* b) {
  using ops::is_scalar;
  if (is_tensor(a) && is_tensor(b)) return tensors_op(&ops::AddOperation_Type, a, b, "+");
  if (is_tensor(a) && is_scalar(b)) return scalar_op(&ops::AddOperation_Type, a, b);
  if (is_tensor(b) && is_scalar(a)) return scalar_op(&ops::AddOperation_Type, b, a);
  Py_RETURN_NOTIMPLEMENTED;
}

PyObject* tensor_sub(PyObject* a, PyObject* b) {
  using ops::is_scalar;
  if (is_tensor(a) && is_tensor(b)) {
    Ref nb = Ref::steal(tensor_neg(b));
    if (!nb) return nullptr;
    return tensors_op(&ops::AddOperation_Type, a, nb.get(), "-");
  }
  if (is_tensor(a) && is_scalar(b)) {
    Ref ns = Ref::steal(PyNumber_Negative(b));
    if (!ns) return nullptr;
    return scalar_op(&ops::AddOperation_Type, a, ns.get());
  }
  if (is_tensor(b) && is_scalar(a)) {
    Ref nb = Ref::steal(tensor_neg(b));
    if (!nb) return nullptr;
    return scalar_op(&ops::AddOperation_Type, nb.get(), a);
  }
  Py_RETURN_NOTIMPLEMENTED;
}

PyObject* tensor_mul(PyObject* a, PyObject* b) {
  using ops::is_scalar;
  if (is_tensor(a) && is_tensor(b)) return tensors_op(&ops::MulOperation_Type, a, b, "*");
  if (is_tensor(a) && is_scalar(b)) return scalar_op(&ops::MulOperation_Type, a, b);
  if (is_tensor(b) && is_scalar(a)) return scalar_op(&ops::MulOperation_Type, b, a);
  Py_RETURN_NOTIMPLEMENTED;
}

PyObject* tensor_truediv(PyObject* a, PyObject* b) {
  if (!is_tensor(a) || !ops::is_scalar(b)) Py_RETURN_NOTIMPLEMENTED;
  const sw::DTypeCode code = dtype_code(as_tensor(a)->dtype);
  if (code == sw::DTypeCode::Int32 || code == sw::DTypeCode::Bool) {
    PyErr_Format(PyExc_TypeError,
                 "t / s of an %s tensor is not supported (its result would not be %s); divide a Float32 "
                 "tensor instead (sw.tensor(t.tolist(), dtype=sw.float32) / s)",
                 sw::dtype_name(code), sw::dtype_name(code));
    return nullptr;
  }
  const double s = PyFloat_AsDouble(b);
  if (s == -1.0 && PyErr_Occurred()) return nullptr;
  Ref inv = Ref::steal(PyFloat_FromDouble(1.0 / s));
  if (!inv) return nullptr;
  return scalar_op(&ops::MulOperation_Type, a, inv.get());
}

PyObject* tensor_neg(PyObject* a) {
  Ref m1 = Ref::steal(PyLong_FromLong(-1));
  if (!m1) return nullptr;
  return ops::run_op_with(&ops::MulOperation_Type, a, m1.get());
}

int ops_module_init(PyObject* module) {
  using namespace ops;
  MulOperation_Type.tp_traverse = Mul_traverse;
  MulOperation_Type.tp_clear = Mul_clear;
  MulOperation_Type.tp_dealloc = Mul_dealloc;
  AddOperation_Type.tp_traverse = Mul_traverse;
  AddOperation_Type.tp_clear = Mul_clear;
  AddOperation_Type.tp_dealloc = Mul_dealloc;
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

// Full TiledEvictable tensors as direct operands of add, mul, relu and
// reduce_sum (see ops_support.hpp): the dense path. The carrier is written in
// Python (strideweave/carriers/tiled_evictable.py); these functions only call
// its hooks: _check_operand(tensor) (tile-footprint rule), _operand(tensor,
// purpose) (blocking dense copy of every tile, no node; RuntimeError when a
// tile is under another caller's pending residency request) and
// _gradient(tensor, dense_grad, zero_tiles, adopt) (a fresh TiledEvictable
// gradient).
//
// The operations first try the tile-by-tile path (ops_tiled_bands.cpp:
// forward, and the backward of mul and relu); what it does not take (a
// layout that does not split at the tiles, a broadcast tiled operand, a
// summing gradient, a dtype the kernels lack, a bad argument) comes here.
#include <cstdint>

#include "autograd/ops_support.hpp"
#include "autograd/ops_tiled.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

namespace {

// The TiledEvictable class, cached once its module has been imported (no
// TiledEvictable can exist before), so the check costs one type test.
PyTypeObject* tiled_class() {
  PyObject*& cls = module_state.tiled_evictable_class;
  if (cls) return reinterpret_cast<PyTypeObject*>(cls);
  Ref name = Ref::steal(PyUnicode_FromString("strideweave.carriers.tiled_evictable"));
  if (!name) {
    PyErr_Clear();
    return nullptr;
  }
  Ref mod = Ref::steal(PyImport_GetModule(name.get()));
  if (!mod) {
    PyErr_Clear();
    return nullptr;
  }
  Ref c = Ref::steal(PyObject_GetAttrString(mod.get(), "TiledEvictable"));
  if (!c || !PyType_Check(c.get())) {
    // Still importing (the class is not defined yet): look again next time.
    PyErr_Clear();
    return nullptr;
  }
  cls = c.release();  // kept for the life of the process
  return reinterpret_cast<PyTypeObject*>(cls);
}

int check_tiled(const Operand& o, const char* op) {
  if (!o.tiled) return 0;
  Ref r = Ref::steal(call_hook(op, "(): ", o.tiled, "_check_operand", o.tensor));
  return r ? 0 : -1;
}

// Replaces the tiled operand by its dense copy. purpose is "operation" or
// "backward" (what the residency policy is told).
int materialize(Operand* o, const char* op, const char* what, const char* purpose) {
  Ref p = Ref::steal(PyUnicode_FromString(purpose));
  if (!p) return -1;
  Ref d = Ref::steal(call_hook(op, what, o->tiled, "_operand", o->tensor, p.get()));
  if (!d) return -1;
  if (!is_tensor(d.get())) {
    PyErr_Format(PyExc_TypeError, "%s%s%s._operand() must return a Tensor, not %.100s", op, what,
                 type_name(o->tiled), Py_TYPE(d.get())->tp_name);
    return -1;
  }
  PyObject* tiled = o->tiled;
  PyTypeObject* cls = o->cls;
  if (view_operand(d.get(), op, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  if (o->cls != cls) {
    PyErr_Format(PyExc_TypeError, "%s%s%s._operand() returned a %s tensor, not one of its primary class %s", op,
                 what, type_name(tiled), type_name(o->cls), type_name(cls));
    return -1;
  }
  o->tiled = tiled;
  o->dense = std::move(d);
  return 0;
}

// The ordinals of the tiles whose gradient slots are all zero, as a tuple,
// for a Float32 host gradient at offset 0 (its layout is the tiled input's,
// so tile k owns slots [k*T, (k+1)*T)); None when that cannot be read here.
PyObject* zero_tiles(PyObject* te, PyObject* g) {
  TensorObject* gt = as_tensor(g);
  const float* data = static_cast<const float*>(carrier_host_data(gt->carrier));
  if (!data || gt->offset != 0 || dtype_code(gt->dtype) != DTypeCode::Float32) Py_RETURN_NONE;
  Ref shape = Ref::steal(PyObject_GetAttrString(te, "tile_shape"));
  if (!shape) return nullptr;
  Ref items = Ref::steal(PySequence_Tuple(shape.get()));
  if (!items) return nullptr;
  Py_ssize_t tile = 1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i) {
    const Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(items.get(), i));
    if (e == -1 && PyErr_Occurred()) return nullptr;
    if (e <= 0) Py_RETURN_NONE;
    tile *= e;
  }
  const Py_ssize_t slots = carrier_size(gt->carrier);
  if (slots < 0) return nullptr;
  const int64_t cos = layout_of(gt->layout).cosize();
  if (cos > slots || cos % tile != 0) Py_RETURN_NONE;
  Ref out = Ref::steal(PyList_New(0));
  if (!out) return nullptr;
  for (int64_t k = 0; k < cos / tile; ++k) {
    const float* p = data + k * tile;
    bool zero = true;
    for (Py_ssize_t j = 0; j < tile && zero; ++j) zero = p[j] == 0.0f;
    if (!zero) continue;
    Ref n = Ref::steal(PyLong_FromLongLong(k));
    if (!n || PyList_Append(out.get(), n.get()) < 0) return nullptr;
  }
  return PyList_AsTuple(out.get());
}

}  // namespace

PyObject* call_hook(const char* op, const char* what, PyObject* carrier, const char* hook, PyObject* a, PyObject* b,
                    PyObject* c, PyObject* d) {
  Ref name = Ref::steal(PyUnicode_FromString(hook));
  if (!name) return nullptr;
  Ref r = Ref::steal(PyObject_CallMethodObjArgs(carrier, name.get(), a, b, c, d, nullptr));
  if (!r) {
    if (!PyErr_ExceptionMatches(PyExc_MemoryError)) autograd::add_error_context(op, what);
    return nullptr;
  }
  return r.release();
}

bool is_tiled_carrier(PyObject* c) {
  if (Py_TYPE(c) == &CPU_Type || Py_TYPE(c) == &Generic_Type) return false;
  PyTypeObject* t = tiled_class();
  return t && PyObject_TypeCheck(c, t);
}

int tiled_operand(const char* op, Operand* o) {
  if (!is_tiled_carrier(o->carrier)) return 0;
  Ref primary = Ref::steal(PyObject_GetAttrString(o->carrier, "primary"));
  if (!primary) return autograd::add_error_context(op, "(): ");
  if (!is_carrier(primary.get()) || is_tiled_carrier(primary.get())) {
    PyErr_Format(PyExc_TypeError, "%s(): the TiledEvictable's primary must be an ordinary Carrier, not %.100s", op,
                 Py_TYPE(primary.get())->tp_name);
    return -1;
  }
  PyTypeObject* cls = Py_TYPE(primary.get());
  if (!PyType_IsSubtype(cls, &CPU_Type) && !PyType_IsSubtype(cls, &Generic_Type)) {
    PyErr_Format(PyExc_TypeError,
                 "%s() supports CPU and Generic tensors; a TiledEvictable computes in its primary's class, %s", op,
                 type_name(cls));
    return -1;
  }
  o->tiled = o->carrier;
  o->cls = cls;
  // The tile-footprint rule, before the other operand is even looked at.
  return check_tiled(*o, op) < 0 ? -1 : 1;
}

int ready_operands(Operand* a, Operand* b, const char* op) {
  // compute_operand validated every operand (check_tiled); the operation
  // checked what it checks; only now are tiles read.
  PyObject* a_source = a->tensor;
  if (a->tiled && !a->dense && materialize(a, op, "(): ", "operation") < 0) return -1;
  if (!b || !b->tiled || b->dense) return 0;
  if (b->tensor == a_source) {
    // add(t, t), mul(t, t): one copy serves both.
    b->tensor = a->tensor;
    b->carrier = a->carrier;
    b->offset = a->offset;
    b->layout = a->layout;
    b->host = a->host;
    b->dense = Ref::borrow(a->dense.get());
    return 0;
  }
  return materialize(b, op, "(): ", "operation");
}

int saved_values(PyObject* t, const char* op, Operand* o) {
  if (saved_operand(t, op, o) < 0) return -1;
  if (o->host || !is_tiled_carrier(o->carrier)) return 0;
  o->tiled = o->carrier;
  o->cls = nullptr;
  Ref primary = Ref::steal(PyObject_GetAttrString(o->carrier, "primary"));
  if (!primary) return autograd::add_error_context(op, " backward: ");
  o->cls = Py_TYPE(primary.get());
  return materialize(o, op, " backward: ", "backward");
}

PyObject* input_gradient(PyObject* x, PyObject* grad, const char* op, bool fresh) {
  Ref g = Ref::steal(grad);
  if (!g) return nullptr;
  PyObject* c = as_tensor(x)->carrier;
  if (!is_tiled_carrier(c)) return g.release();
  Ref zeros = Ref::steal(zero_tiles(c, g.get()));
  if (!zeros) return nullptr;
  return call_hook(op, " backward: ", c, "_gradient", x, g.get(), zeros.get(), fresh ? Py_True : Py_False);
}

}  // namespace swpy::ops

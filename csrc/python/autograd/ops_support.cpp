// Operands, results and gradient helpers of the differentiable operations
// (see ops_support.hpp).
#include "autograd/ops_support.hpp"
#include "autograd/graph.hpp"

#include <cstdio>
#include <cstring>
#include "dtype_object.hpp"
#include "layout/algebra.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

// ------------------------------------------------------------ operands

namespace {

int reject_multi(PyObject* t, const char* op) {
  char reason[96];
  std::snprintf(reason, sizeof reason, "operation %s", op);
  return tensor_reject_multi(t, reason);
}

int check_live(const Operand& o, const char* op) {
  int r = carrier_is_released(o.carrier);
  if (r < 0) return -1;
  if (r) {
    PyErr_Format(PyExc_RuntimeError, "%s(): the tensor's %s carrier is released", op, type_name(o.carrier));
    return -1;
  }
  return 0;
}

}  // namespace

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
  o->cls = Py_TYPE(tt->carrier);
  return check_live(*o, op);
}

int compute_operand(PyObject* t, const char* op, Operand* o) {
  if (view_operand(t, op, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  if (!o->host && PyObject_TypeCheck(o->carrier, &CPU_Type) && carrier_overrides(o->carrier, "dtype") &&
      !carrier_overrides(o->carrier, "size")) {
    // A dtype() hook hides the raw buffer (carrier_host_data). Kernels read
    // the native storage with the tensor's dtype: compute on the native
    // truth when the two agree, refuse when they do not.
    const CpuStorage st = cpu_storage_of(o->carrier);
    if (st.dtype != o->dtype) {
      PyErr_Format(PyExc_TypeError,
                   "%s(): the %s carrier's dtype() hook says %s but its native storage holds %s; operations "
                   "compute only on the native storage dtype",
                   op, type_name(o->carrier), dtype_label(as_tensor(t)->dtype), dtype_label(dtype_singleton(st.dtype)));
      return -1;
    }
    o->host = st.data;
  }
  bool host_path = o->host != nullptr;
  if (!o->host && !PyObject_TypeCheck(o->carrier, &Generic_Type)) {
    // Only here (neither CPU nor Generic) is a TiledEvictable looked for.
    const int tiled = tiled_operand(op, o);
    if (tiled < 0) return -1;
    if (!tiled) {
      // The fix depends on the dtype: CPU holds Float32, Int32 and Bool;
      // Generic holds the rest (Floating, Any) and grows an empty carrier.
      const char* cls = type_name(o->carrier);
      PyErr_Format(PyExc_TypeError, "%s() supports CPU and Generic tensors, not %s %s carrier: %s", op, article(cls),
                   cls, move_fix_hint(o->dtype));
      return -1;
    }
    host_path = PyType_IsSubtype(o->cls, &CPU_Type);
  }
  if (!sw::ops::computes(o->dtype, host_path)) {
    PyErr_Format(PyExc_TypeError, "%s() does not support %s tensors", op, dtype_label(as_tensor(t)->dtype));
    return -1;
  }
  return 0;
}

int check_pair(const Operand& a, const Operand& b, const char* op) {
  const sw::ops::PairFit fit = sw::ops::pair_fit(a.cls == b.cls, a.dtype, b.dtype);
  if (fit == sw::ops::PairFit::ClassDiffers) {
    if (a.tiled || b.tiled)
      PyErr_Format(PyExc_TypeError,
                   "%s() needs tensors of one carrier class (a TiledEvictable computes in its primary's class), "
                   "got %s%s%s and %s%s%s",
                   op, type_name(a.carrier), a.tiled ? " with primary " : "", a.tiled ? type_name(a.cls) : "",
                   type_name(b.carrier), b.tiled ? " with primary " : "", b.tiled ? type_name(b.cls) : "");
    else
      PyErr_Format(PyExc_TypeError, "%s() needs tensors of one carrier class, got %s and %s", op,
                   type_name(a.carrier), type_name(b.carrier));
    return -1;
  }
  if (fit == sw::ops::PairFit::DtypeDiffers) {
    PyErr_Format(PyExc_TypeError, "%s() needs tensors of one dtype, got %s and %s", op,
                 dtype_label(as_tensor(a.tensor)->dtype), dtype_label(as_tensor(b.tensor)->dtype));
    return -1;
  }
  return 0;
}

int cotangent_operand(PyObject* g, const char* op, Operand* o) {
  char name[64];
  std::snprintf(name, sizeof name, "%s backward", op);
  if (view_operand(g, name, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  if (!dtype_is_differentiable(as_tensor(g)->dtype)) {
    PyErr_Format(PyExc_TypeError, "%s: the gradient must be Float32 or Floating, not %s", name,
                 dtype_label(as_tensor(g)->dtype));
    return -1;
  }
  return 0;
}

int saved_operand(PyObject* t, const char* op, Operand* o) {
  char name[64];
  std::snprintf(name, sizeof name, "%s backward", op);
  if (view_operand(t, name, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  return 0;
}

char numpy_scalar_kind(PyObject* v) {
  for (PyTypeObject* t = Py_TYPE(v); t; t = t->tp_base) {
    const char* n = t->tp_name;
    if (std::strncmp(n, "numpy.", 6) != 0) continue;
    if (std::strcmp(n + 6, "integer") == 0) return 'i';
    if (std::strcmp(n + 6, "floating") == 0) return 'f';
    if (std::strcmp(n + 6, "generic") == 0) return 0;  // bool, complex, strings, dates
  }
  return 0;
}

int index_list(const Leaves& l, std::vector<int64_t>& out) {
  return engine_call([&] { out = sw::coordinate_indices(l); });
}

// ------------------------------------------------------------ results

PyObject* alloc_host(PyObject* like, Py_ssize_t n, DTypeCode dtype, bool zero, void** data) {
  Ref c = Ref::steal(Py_TYPE(like) == &CPU_Type ? cpu_new(n, dtype, true, !zero)
                                                 : carrier_allocate_like(like, n, true, dtype_singleton(dtype), !zero));
  if (!c) return nullptr;
  // Checked before anything is written (issue 15 item 2): the kernel writes
  // n slots of dtype at *data, so both come from the native storage.
  if (PyObject_TypeCheck(c.get(), &CPU_Type)) {
    const CpuStorage st = cpu_storage_of(c.get());
    if (Py_TYPE(c.get()) != Py_TYPE(like) && Py_TYPE(c.get()) != &CPU_Type) {
      PyErr_Format(PyExc_TypeError, "%s.allocate_like() returned a %s", type_name(like), type_name(c.get()));
      return nullptr;
    }
    if (st.dtype != dtype || st.size < n) {
      PyErr_Format(PyExc_RuntimeError,
                   "%s.allocate_like() returned storage of %zd %s slots, the result needs %zd %s slots",
                   type_name(like), st.size, dtype_label(dtype_singleton(st.dtype)), n,
                   dtype_label(dtype_singleton(dtype)));
      return nullptr;
    }
    *data = st.data;
  } else {
    *data = nullptr;
  }
  if (!*data) {
    PyErr_Format(PyExc_TypeError, "%s.allocate_like() returned storage without host memory", type_name(like));
    return nullptr;
  }
  return c.release();
}

PyObject* wrap(PyObject* carrier, const sw::Layout& l, PyObject* layout_obj) {
  Ref c = Ref::steal(carrier);
  if (!c) return nullptr;
  Ref lo = layout_obj ? Ref::borrow(layout_obj) : Ref::steal(layout_from_engine(l));
  if (!lo) return nullptr;
  return tensor_new(c.get(), 0, lo.get());
}

PyObject* zero_list(DTypeCode dtype, Py_ssize_t n) {
  Ref list = Ref::steal(PyList_New(n));
  if (!list) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* z = value_zero(dtype);
    if (!z) return nullptr;
    PyList_SET_ITEM(list.get(), i, z);
  }
  return list.release();
}

PyObject* get_slot(const Operand& o, int64_t idx) {
  return carrier_get(o.carrier, o.offset + static_cast<Py_ssize_t>(idx));
}

int list_accumulate(PyObject* list, int64_t slot, PyObject* v) {
  Ref value = Ref::steal(v);
  if (!value) return -1;
  PyObject* s = PyNumber_Add(PyList_GET_ITEM(list, slot), value.get());
  if (!s) return -1;
  return PyList_SetItem(list, slot, s);  // drops the old item
}

void list_store(PyObject* list, int64_t slot, PyObject* v) {
  PyList_SetItem(list, slot, v);  // in range: cannot fail; drops the old item
}

PyObject* pair_or_none(PyObject* a, PyObject* b) {
  Ref ra = Ref::steal(a), rb = Ref::steal(b);
  PyObject* r = PyTuple_New(2);
  if (!r) return nullptr;
  PyTuple_SET_ITEM(r, 0, ra ? ra.release() : Py_NewRef(Py_None));
  PyTuple_SET_ITEM(r, 1, rb ? rb.release() : Py_NewRef(Py_None));
  return r;
}

PyObject* single(PyObject* a) {
  Ref ra = Ref::steal(a);
  if (!ra) return nullptr;
  PyObject* r = PyTuple_New(1);
  if (!r) return nullptr;
  PyTuple_SET_ITEM(r, 0, ra.release());
  return r;
}

// ------------------------------------------------------------ gradients

PyObject* saved_inputs(PyObject* self, Py_ssize_t n, const char* op) {
  OperationObject* o = reinterpret_cast<OperationObject*>(self);
  const Py_ssize_t found = o->inputs ? PyTuple_GET_SIZE(o->inputs) : 0;
  switch (sw::autograd::saved_inputs_state(o->inputs != nullptr, o->graph_freed, static_cast<size_t>(found),
                                           static_cast<size_t>(n))) {
    case sw::autograd::SavedState::Ok:
      return o->inputs;
    case sw::autograd::SavedState::Freed:
      PyErr_Format(PyExc_RuntimeError,
                   "%s backward: the graph was freed by an earlier backward pass; pass retain_graph=True to "
                   "backward more than once",
                   op);
      return nullptr;
    case sw::autograd::SavedState::NotRecorded:
      PyErr_Format(PyExc_RuntimeError, "%s backward: no forward pass was recorded", op);
      return nullptr;
    case sw::autograd::SavedState::CountMismatch:
      break;
  }
  PyErr_Format(PyExc_RuntimeError, "%s backward: expected %zd saved inputs, found %zd", op, n, found);
  return nullptr;
}

PyObject* grad_layout_object(PyObject* x, const sw::Layout& gl) {
  return gl == layout_of(as_tensor(x)->layout) ? as_tensor(x)->layout : nullptr;
}

PyObject* reduce_to(const Operand& g, PyObject* xt, const char* op) {
  sw::ops::ReducePlan p;
  if (backward_call(op, [&] { p = sw::ops::plan_reduce_to(g.L(), layout_of(as_tensor(xt)->layout)); }) < 0)
    return nullptr;
  if (p.passthrough) return Py_NewRef(g.tensor);
  PyObject* lobj = grad_layout_object(xt, p.layout);
  if (g.host_f32())
    return host_gradient(op, g, p, lobj, [&](float* out) {
      sw::ops::reduce_to_host(p, static_cast<const float*>(g.at()), g.L().leaves(), out);
    });
  std::vector<int64_t> ig, io;
  if (index_list(g.L().leaves(), ig) < 0 || index_list(p.target, io) < 0) return nullptr;
  Ref list = Ref::steal(zero_list(DTypeCode::Floating, p.slots()));
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k)
    if (list_accumulate(list.get(), io[k], get_slot(g, ig[k])) < 0) return nullptr;
  return wrap(carrier_new_like(g.carrier, list.get(), true, nullptr), p.layout, lobj);
}

}  // namespace swpy::ops

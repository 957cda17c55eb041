// SliceOperation: the autograd node of a view made by basic indexing
// (t[i, :], t[1:3], t[..., None]; tensor_index.cpp makes the view).
//
// Forward is pure layout algebra: the view shares its source's carrier, so
// it costs no copy. Backward scatters the cotangent into a zero gradient
// over the source's gradient layout (sw::gradient_layout): the same key
// applied to that layout gives the slots the view's coordinates are, so
// every coordinate the view did not select gets 0.
//
// The node is recorded natively (no _forward call) unless a profiler session
// is active; then the generic Operation.forward runs, which records the
// "slice" event like any operation's.
#include <new>

#include "autograd/ops_support.hpp"
#include "layout_slice.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "profiler_api.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy::ops {

namespace {

struct SliceOperationObject {
  OperationObject base;
  std::vector<sw::SlicePart>* key;  // the parsed key; NULL before a forward
};

SliceOperationObject* as_slice(PyObject* o) { return reinterpret_cast<SliceOperationObject*>(o); }

void Slice_dealloc(PyObject* self) {
  delete as_slice(self)->key;
  as_slice(self)->key = nullptr;
  Operation_Type.tp_dealloc(self);
}

int set_key(PyObject* op, std::span<const sw::SlicePart> key) {
  try {
    auto* k = new std::vector<sw::SlicePart>(key.begin(), key.end());
    delete as_slice(op)->key;
    as_slice(op)->key = k;
    return 0;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return -1;
  }
}

// _forward(t, key): the view of t that key selects (the parsed key of a
// native recording, or key parsed now).
PyObject* Slice_forward(PyObject* self, PyObject* args) {
  PyObject *t, *key;
  if (!PyArg_UnpackTuple(args, "slice", 2, 2, &t, &key)) return nullptr;
  if (!is_tensor(t)) {
    PyErr_Format(PyExc_TypeError, "slice() expects a Tensor, not %.100s", Py_TYPE(t)->tp_name);
    return nullptr;
  }
  if (!as_slice(self)->key) {
    std::vector<sw::SlicePart> parts;
    if (tensor_parse_view_key(key, &parts) < 0 || set_key(self, parts) < 0) return nullptr;
  }
  return tensor_view_unrecorded(t, *as_slice(self)->key, key);
}

// Values path of the scatter: a list of zeros with g's values at the view's
// slots, stored through g's carrier class.
PyObject* scatter_values(const Operand& g, const sw::Layout& gl, int64_t offset, const sw::Layout& view) {
  std::vector<int64_t> ig, iv;
  if (index_list(g.L().leaves(), ig) < 0 || index_list(view.leaves(), iv) < 0) return nullptr;
  Ref list = Ref::steal(zero_list(DTypeCode::Floating, static_cast<Py_ssize_t>(gl.cosize())));
  if (!list) return nullptr;
  for (size_t k = 0; k < ig.size(); ++k) {
    PyObject* v = get_slot(g, ig[k]);
    if (!v) return nullptr;
    list_store(list.get(), offset + iv[k], v);
  }
  return carrier_new_like(g.carrier, list.get(), true, nullptr);
}

PyObject* Slice_backward(PyObject* self, PyObject* g) {
  PyObject* in = saved_inputs(self, 1, "slice");
  if (!in) return nullptr;
  Operand go;
  if (cotangent_operand(g, "slice", &go) < 0) return nullptr;
  PyObject* x = PyTuple_GET_ITEM(in, 0);
  if (!differentiable(x)) return single(Py_NewRef(Py_None));
  const std::vector<sw::SlicePart>* key = as_slice(self)->key;
  if (!key) {
    PyErr_SetString(PyExc_RuntimeError, "slice backward: no forward pass was recorded");
    return nullptr;
  }
  // The same key on the gradient layout (same shape as x) selects the
  // gradient's slots of the view's coordinates.
  sw::Layout gl;
  sw::SliceResult r;
  sw::SliceError e;
  sw::SliceStatus st = sw::SliceStatus::Ok;
  if (backward_call("slice", [&] {
        gl = sw::gradient_layout(layout_of(as_tensor(x)->layout));
        st = sw::slice_layout(gl, *key, &r, &e);
      }) < 0)
    return nullptr;
  if (st != sw::SliceStatus::Ok || r.layout.shape() != go.L().shape()) {
    PyErr_SetString(PyExc_RuntimeError, "slice backward: the key no longer fits the input's gradient layout");
    return nullptr;
  }
  PyObject* lobj = grad_layout_object(x, gl);
  Ref grad;
  if (go.host_f32()) {
    const sw::ops::GradPlan plan{gl, {}, false, true};
    grad = Ref::steal(host_gradient("slice", go, plan, lobj, [&](float* out) {
      K::copy(DTypeCode::Float32, go.at(), go.L().leaves(), out + r.offset, r.layout.leaves());
    }));
  } else {
    grad = Ref::steal(wrap(scatter_values(go, gl, r.offset, r.layout), gl, lobj));
  }
  if (!grad) return nullptr;
  return single(input_gradient(x, grad.release(), "slice", true));
}

PyMethodDef Slice_methods[] = {
    {"_forward", Slice_forward, METH_VARARGS,
     "_forward(t, key): the view of t that a basic-indexing key selects (same carrier, no copy)."},
    {"backward", Slice_backward, METH_O,
     "Scatters the cotangent into a zero gradient of the input (0 where the view did not look)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject SliceOperation_Type = static_type("strideweave.SliceOperation", sizeof(SliceOperationObject));

}  // namespace swpy::ops

namespace swpy {

PyObject* view_forward(PyObject* source, std::span<const sw::SlicePart> key, PyObject* key_obj) {
  using ops::SliceOperation_Type;
  Ref op = Ref::steal(SliceOperation_Type.tp_alloc(&SliceOperation_Type, 0));
  if (!op || ops::set_key(op.get(), key) < 0) return nullptr;
  if (profiler_current()) {
    Ref args = Ref::steal(PyTuple_Pack(2, source, key_obj ? key_obj : Py_None));
    if (!args) return nullptr;
    return operation_forward(op.get(), args.get());
  }
  Ref view = Ref::steal(tensor_view_unrecorded(source, *ops::as_slice(op.get())->key, key_obj));
  if (!view) return nullptr;
  // What Operation.forward's recording does, without its generic steps.
  OperationObject* o = reinterpret_cast<OperationObject*>(op.get());
  Ref version = Ref::steal(PyLong_FromUnsignedLongLong(as_carrier(as_tensor(source)->carrier)->version));
  if (!version) return nullptr;
  o->inputs = PyTuple_Pack(1, source);
  o->versions = o->inputs ? PyTuple_Pack(1, version.get()) : nullptr;
  if (!o->versions) return nullptr;
  as_tensor(view.get())->autograd_ctx = op.release();
  return view.release();
}

int ops_view_module_init(PyObject* module) {
  using ops::SliceOperation_Type;
  SliceOperation_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  SliceOperation_Type.tp_base = &Operation_Type;
  SliceOperation_Type.tp_traverse = Operation_Type.tp_traverse;
  SliceOperation_Type.tp_clear = Operation_Type.tp_clear;
  SliceOperation_Type.tp_dealloc = ops::Slice_dealloc;
  SliceOperation_Type.tp_methods = ops::Slice_methods;
  SliceOperation_Type.tp_doc = "Node of a view made by basic indexing (t[i, :], t[1:3], t[..., None]).";
  if (add_type(module, &SliceOperation_Type, "SliceOperation") < 0) return -1;
  Ref n = Ref::steal(PyUnicode_FromString("slice"));
  if (!n) return -1;
  const int rc = PyDict_SetItemString(SliceOperation_Type.tp_dict, "op_name", n.get());
  PyType_Modified(&SliceOperation_Type);
  return rc;
}

}  // namespace swpy

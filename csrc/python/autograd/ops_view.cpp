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
// "slice" event like any operation's. A view of an injective tensor defers
// its node: the view keeps its source and version, and the node is built
// the first time autograd_ctx is asked for (by backward, or by the user).
#include <new>

#include "autograd/ops_support.hpp"
#include "layout/algebra.hpp"
#include "layout/slice.hpp"
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

// A part without nested parts, as plain data: a short flat key is kept in
// the node itself (the object's zeroed memory needs no constructor), so
// recording a view allocates nothing but the node and its two tuples.
struct PlainPart {
  sw::SlicePart::Kind kind;
  int64_t index, start, stop, step;
};
constexpr size_t kPlainParts = 4;

// A node knows the view's slots in the input's gradient one of two ways: by
// the key (applied to the gradient layout at backward), or, for a view of an
// injective input (whose gradient layout is its own layout), by the view's
// offset from the input's and its layout: a deferred node (tensor_autograd_ctx)
// is always the second kind.
struct SliceOperationObject {
  OperationObject base;
  bool recorded;                      // a key is stored (plain or heap), or view_layout is set
  size_t plain_count;                 // parts in plain (when heap is NULL)
  PlainPart plain[kPlainParts];
  std::vector<sw::SlicePart>* heap;   // a nested or longer key
  PyObject* view_layout;              // the view's Layout (strong), or NULL for a key
  int64_t view_delta;                 // the view's offset minus the input's
};

SliceOperationObject* as_slice(PyObject* o) { return reinterpret_cast<SliceOperationObject*>(o); }

void Slice_dealloc(PyObject* self) {
  delete as_slice(self)->heap;
  as_slice(self)->heap = nullptr;
  Py_CLEAR(as_slice(self)->view_layout);
  Operation_Type.tp_dealloc(self);
}

int set_key(PyObject* op, std::span<const sw::SlicePart> key) {
  SliceOperationObject* o = as_slice(op);
  bool plain = key.size() <= kPlainParts;
  for (const sw::SlicePart& p : key) plain = plain && p.kind != sw::SlicePart::Kind::Nested;
  if (plain) {
    delete o->heap;
    o->heap = nullptr;
    for (size_t i = 0; i < key.size(); ++i)
      o->plain[i] = PlainPart{key[i].kind, key[i].index, key[i].start, key[i].stop, key[i].step};
    o->plain_count = key.size();
    o->recorded = true;
    return 0;
  }
  return engine_call([&] {
    auto* k = new std::vector<sw::SlicePart>(key.begin(), key.end());
    delete o->heap;
    o->heap = k;
    o->recorded = true;
  });
}

// The stored key as engine parts.
std::vector<sw::SlicePart> stored_key(PyObject* op) {
  SliceOperationObject* o = as_slice(op);
  if (o->heap) return *o->heap;
  std::vector<sw::SlicePart> parts(o->plain_count);
  for (size_t i = 0; i < o->plain_count; ++i) {
    const PlainPart& p = o->plain[i];
    parts[i].kind = p.kind;
    parts[i].index = p.index;
    parts[i].start = p.start;
    parts[i].stop = p.stop;
    parts[i].step = p.step;
  }
  return parts;
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
  if (!as_slice(self)->recorded) {
    std::vector<sw::SlicePart> parts;
    if (tensor_parse_view_key(key, &parts) < 0 || set_key(self, parts) < 0) return nullptr;
  }
  std::vector<sw::SlicePart> parts;
  if (engine_call([&] { parts = stored_key(self); }) < 0) return nullptr;
  return tensor_view_unrecorded(t, parts, key);
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
  if (!as_slice(self)->recorded) {
    PyErr_SetString(PyExc_RuntimeError, "slice backward: no forward pass was recorded");
    return nullptr;
  }
  // The gradient's slots of the view's coordinates: the same key on the
  // gradient layout (same shape as x), or, for an injective x (its own
  // layout is its gradient's), the view's own offset and layout.
  SliceOperationObject* o = as_slice(self);
  sw::Layout gl;
  sw::SliceResult r;
  sw::SliceError e;
  sw::SliceStatus st = sw::SliceStatus::Ok;
  if (backward_call("slice", [&] {
        gl = sw::gradient_layout(layout_of(as_tensor(x)->layout));
        if (o->view_layout) {
          r.offset = o->view_delta;
          r.layout = layout_of(o->view_layout);
          if (!(gl == layout_of(as_tensor(x)->layout))) st = sw::SliceStatus::Inexpressible;
        } else {
          st = sw::slice_layout(gl, stored_key(self), &r, &e);
        }
      }) < 0)
    return nullptr;
  if (st != sw::SliceStatus::Ok || r.layout.shape() != go.L().shape()) {
    PyErr_SetString(PyExc_RuntimeError, "slice backward: the view no longer fits the input's gradient layout");
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

namespace {

// A fresh node with its fields set by hand: every view in grad mode makes
// one, and this skips zeroing the inline key storage (SliceOperation is not
// subclassable, so the type is exact).
PyObject* new_slice_node() {
  auto* o = PyObject_GC_New(ops::SliceOperationObject, &ops::SliceOperation_Type);
  if (!o) return nullptr;
  o->base.dict = nullptr;
  o->base.weakreflist = nullptr;
  o->base.inputs = nullptr;
  o->base.versions = nullptr;
  o->base.graph_freed = false;
  o->recorded = false;
  o->plain_count = 0;
  o->heap = nullptr;
  o->view_layout = nullptr;
  o->view_delta = 0;
  PyObject_GC_Track(o);
  return reinterpret_cast<PyObject*>(o);
}

// Saves the node's input and its version token.
int save_input(PyObject* op, PyObject* source, uint64_t version) {
  OperationObject* o = reinterpret_cast<OperationObject*>(op);
  Ref v = Ref::steal(PyLong_FromUnsignedLongLong(version));
  if (!v) return -1;
  if (!(o->inputs = PyTuple_New(1))) return -1;
  PyTuple_SET_ITEM(o->inputs, 0, Py_NewRef(source));
  if (!(o->versions = PyTuple_New(1))) return -1;
  PyTuple_SET_ITEM(o->versions, 0, v.release());
  return 0;
}

}  // namespace

PyObject* view_node(PyObject* view) {
  TensorObject* v = as_tensor(view);
  PyObject* source = v->view_source;
  Ref op = Ref::steal(new_slice_node());
  if (!op || save_input(op.get(), source, v->view_version) < 0) return nullptr;
  ops::SliceOperationObject* o = ops::as_slice(op.get());
  o->view_layout = Py_NewRef(v->layout);
  o->view_delta = v->offset - as_tensor(source)->offset;
  o->recorded = true;
  return op.release();
}

PyObject* view_forward(PyObject* source, std::span<const sw::SlicePart> key, PyObject* key_obj) {
  if (profiler_current()) {
    Ref op = Ref::steal(new_slice_node());
    if (!op || ops::set_key(op.get(), key) < 0) return nullptr;
    Ref args = Ref::steal(PyTuple_Pack(2, source, key_obj ? key_obj : Py_None));
    if (!args) return nullptr;
    return operation_forward(op.get(), args.get());
  }
  Ref view = Ref::steal(tensor_view_unrecorded(source, key, key_obj));
  if (!view) return nullptr;
  const uint64_t version = as_carrier(as_tensor(source)->carrier)->version;
  const int injective = layout_is_injective(as_tensor(source)->layout);
  if (injective < 0) return nullptr;
  if (injective) {
    // The node is built only if someone asks for it (most views never reach
    // a backward): the view keeps its source and the version for it.
    as_tensor(view.get())->view_source = Py_NewRef(source);
    as_tensor(view.get())->view_version = version;
    return view.release();
  }
  Ref op = Ref::steal(new_slice_node());
  if (!op || ops::set_key(op.get(), key) < 0 || save_input(op.get(), source, version) < 0) return nullptr;
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

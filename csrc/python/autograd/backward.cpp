// Tensor.backward: the reverse-mode traversal.
//
// A pass discovers every differentiable tensor reachable from the root
// through autograd_ctx -> Operation.inputs(); the engine's BackwardGraph
// (csrc/engine/autograd/graph.hpp) counts each tensor's consumers and hands
// out nodes in Kahn order, so each node's backward runs once, after all its
// consumers contributed, and routes each returned gradient to its slot. Every
// gradient handed to a tensor must satisfy the cotangent layout contract
// (autograd_check_cotangent). Contributions to one tensor are summed into
// fresh storage. Leaves (and non-leaves that retain_grad()) get their .grad
// only when the whole pass succeeded, summed with any earlier .grad, in
// fresh storage obtained through the tensor's own carrier class (so it works
// after that carrier was released). Without retain_graph=True the visited
// nodes drop their saved inputs afterwards, and a later pass through them
// raises RuntimeError naming retain_graph=True. Backward hooks run with grad
// mode off.
#include <cstdio>
#include <vector>

#include "autograd/graph.hpp"
#include "autograd/internal.hpp"
#include "ops/rules.hpp"
#include "autograd/ops_support.hpp"
#include "ops/kernels.hpp"
#include "dtype_object.hpp"
#include "layout/algebra.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"

namespace swpy {

namespace {

namespace K = sw::kernels;
using autograd::differentiable;
using autograd::dtype_label;
using autograd::shape_obj;

// ------------------------------------------------------------ accumulation

// Host path of sum_gradients: every gradient is Float32 host memory.
PyObject* sum_on_host(PyObject* like, const std::vector<PyObject*>& grads, const sw::ops::AccumulationPlan& p) {
  const sw::Layout& gl = p.layout;
  const int64_t cos = gl.cosize();
  void* data = nullptr;
  Ref carrier = Ref::steal(ops_alloc_host(like, cos, sw::DTypeCode::Float32, p.zero_fill, &data));
  if (!carrier) return nullptr;
  if (engine_call_in("gradient accumulation: ", "", [&] {
        std::vector<K::Source> sources;
        for (PyObject* g : grads) {
          TensorObject* t = as_tensor(g);
          sources.push_back({static_cast<const float*>(carrier_host_data(t->carrier)) + t->offset,
                             &layout_of(t->layout).leaves()});
        }
        K::sum_sources(sources, static_cast<float*>(data), gl.leaves(), cos);
      }) < 0)
    return nullptr;
  return carrier.release();
}

// Values path of sum_gradients: Python arithmetic slot by slot.
PyObject* sum_as_values(PyObject* like, const std::vector<PyObject*>& grads, const sw::Layout& gl) {
  const int64_t cos = gl.cosize();
  std::vector<int64_t> io, ig;
  if (engine_call_in("gradient accumulation: ", "", [&] { io = sw::coordinate_indices(gl.leaves()); }) < 0)
    return nullptr;
  Ref list = Ref::steal(PyList_New(cos));
  if (!list) return nullptr;
  for (Py_ssize_t i = 0; i < cos; ++i) {
    PyObject* z = PyFloat_FromDouble(0.0);
    if (!z) return nullptr;
    PyList_SET_ITEM(list.get(), i, z);
  }
  for (PyObject* g : grads) {
    TensorObject* t = as_tensor(g);
    if (engine_call_in("gradient accumulation: ", "",
                       [&] { ig = sw::coordinate_indices(layout_of(t->layout).leaves()); }) < 0)
      return nullptr;
    for (size_t k = 0; k < ig.size(); ++k) {
      Ref v = Ref::steal(carrier_get(t->carrier, t->offset + static_cast<Py_ssize_t>(ig[k])));
      if (!v) return nullptr;
      PyObject* s = PyNumber_Add(PyList_GET_ITEM(list.get(), io[k]), v.get());
      if (!s || PyList_SetItem(list.get(), io[k], s) < 0) return nullptr;  // drops the old item
    }
  }
  return carrier_new_like(like, list.get(), true, nullptr);
}

// The sum of grads (Tensors of the plan's shape, any layouts and carriers)
// laid out as the plan's layout at offset 0 in fresh storage of like's exact
// class. layout_obj (borrowed, may be NULL) is the Layout object to reuse.
PyObject* sum_gradients(PyObject* like, const std::vector<PyObject*>& grads, const sw::ops::AccumulationPlan& p,
                        PyObject* layout_obj) {
  const sw::Layout& gl = p.layout;
  bool host = PyObject_TypeCheck(like, &CPU_Type);
  if (host) {
    Ref d = Ref::steal(carrier_dtype(like));
    if (!d) return nullptr;
    host = dtype_code(d.get()) == sw::DTypeCode::Float32;
  }
  for (PyObject* g : grads) {
    TensorObject* t = as_tensor(g);
    if (!(layout_of(t->layout).shape() == gl.shape())) {
      PyErr_Format(PyExc_ValueError, "gradient of shape %R cannot accumulate into shape %R (layout mismatch)",
                   shape_obj(g), layout_obj ? layout_shape_or_none(layout_obj) : Py_None);
      return nullptr;
    }
    int rel = carrier_is_released(t->carrier);
    if (rel < 0) return nullptr;
    if (rel) {
      PyErr_Format(PyExc_RuntimeError, "a gradient's %s carrier is released", type_name(t->carrier));
      return nullptr;
    }
    if (dtype_code(t->dtype) != sw::DTypeCode::Float32 || !carrier_host_data(t->carrier)) host = false;
  }
  Ref carrier = Ref::steal(host ? sum_on_host(like, grads, p) : sum_as_values(like, grads, gl));
  if (!carrier) return nullptr;
  Ref lo = layout_obj ? Ref::borrow(layout_obj) : Ref::steal(layout_from_engine(gl));
  if (!lo) return nullptr;
  return tensor_new(carrier.get(), 0, lo.get());
}

// Sum of grads for tensor t in t's gradient layout, created through like.
PyObject* gradient_for(PyObject* t, PyObject* like, const std::vector<PyObject*>& grads) {
  const sw::Layout& tl = layout_of(as_tensor(t)->layout);
  sw::ops::AccumulationPlan p;
  if (engine_call_in("gradient accumulation: ", "", [&] { p = sw::ops::plan_accumulation(tl, grads.size()); }) < 0)
    return nullptr;
  if (p.own_layout && ops::is_tiled_carrier(like)) {
    // A TiledEvictable's full tensor: summed tile by tile into a fresh
    // TiledEvictable (untouched tiles implicit zero) where every
    // contribution fits, else value by value below.
    Ref r = Ref::steal(ops::tiled_sum_gradients(t, like, grads));
    if (!r) {
      if (!PyErr_ExceptionMatches(PyExc_MemoryError)) add_error_context("gradient accumulation: ");
      return nullptr;
    }
    if (r.get() != Py_NotImplemented) return r.release();
  }
  return sum_gradients(like, grads, p, p.own_layout ? as_tensor(t)->layout : nullptr);
}

// ------------------------------------------------------------ the graph
//
// The order and the routing are sw::autograd::BackwardGraph's (keys are the
// tensors' addresses); each node here keeps the Python objects alive.

namespace AG = sw::autograd;

struct Node {
  Ref tensor;
  Ref op;        // NULL for a leaf
  Ref inputs;    // the op's saved inputs at discovery
  Ref versions;
  std::vector<Ref> grads;  // contributions
};

PyObject* tensor_at(const AG::BackwardGraph& g, size_t i) {
  return const_cast<PyObject*>(static_cast<const PyObject*>(g.key(i)));
}

std::vector<PyObject*> borrowed(const std::vector<Ref>& refs) {
  std::vector<PyObject*> out;
  out.reserve(refs.size());
  for (const Ref& r : refs) out.push_back(r.get());
  return out;
}

int freed_error(PyObject* op) {
  PyErr_Format(PyExc_RuntimeError,
               "the graph through %s was already freed by a backward pass; use retain_graph=True on the first "
               "backward to run backward through it again",
               type_name(op));
  return -1;
}

// Reads every reachable tensor's producer into the graph.
int discover(AG::BackwardGraph& g, std::vector<Node>& nodes) {
  for (size_t i; (i = g.next_to_discover()) != AG::kNoNode;) {
    nodes.resize(g.size());
    PyObject* t = tensor_at(g, i);  // kept alive by a discovered node's inputs
    nodes[i].tensor = Ref::borrow(t);
    PyObject* ctx;
    if (tensor_autograd_ctx(t, &ctx) < 0) return -1;
    if (!ctx || ctx == Py_None) {
      g.set_leaf(i);
      continue;
    }
    if (!is_operation(ctx)) {
      PyErr_Format(PyExc_TypeError, "autograd_ctx must be an Operation, not %.100s", Py_TYPE(ctx)->tp_name);
      return -1;
    }
    OperationObject* op = reinterpret_cast<OperationObject*>(ctx);
    if (op->graph_freed) return freed_error(ctx);
    nodes[i].op = Ref::borrow(ctx);
    if (!op->inputs) {
      g.set_producer(i, false, {});
      continue;
    }
    if (!PyTuple_Check(op->inputs) || !op->versions || !PyTuple_Check(op->versions) ||
        PyTuple_GET_SIZE(op->versions) != PyTuple_GET_SIZE(op->inputs)) {
      PyErr_Format(PyExc_RuntimeError, "%s has inconsistent saved inputs", type_name(ctx));
      return -1;
    }
    nodes[i].inputs = Ref::borrow(op->inputs);
    nodes[i].versions = Ref::borrow(op->versions);
    std::vector<AG::NodeKey> keys;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(op->inputs); ++k) {
      PyObject* in = PyTuple_GET_ITEM(op->inputs, k);
      keys.push_back(is_tensor(in) && differentiable(in) ? in : nullptr);
    }
    g.set_producer(i, true, keys);
  }
  nodes.resize(g.size());
  return 0;
}

int check_versions(const Node& n) {
  const Py_ssize_t count = PyTuple_GET_SIZE(n.inputs.get());
  std::vector<uint64_t> saved(static_cast<size_t>(count)), now(static_cast<size_t>(count));
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* in = PyTuple_GET_ITEM(n.inputs.get(), k);
    if (!is_tensor(in)) continue;
    PyObject* c = as_tensor(in)->carrier;
    now[k] = c ? as_carrier(c)->version : 0;
    saved[k] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(n.versions.get(), k));
    if (saved[k] == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return -1;
  }
  const size_t k = AG::first_modified(saved, now);
  if (k == AG::kNoNode) return 0;
  PyErr_Format(PyExc_RuntimeError,
               "input %zu saved by %s was modified in-place after the forward pass (version %llu, saved "
               "version %llu)",
               k, type_name(n.op.get()), static_cast<unsigned long long>(now[k]),
               static_cast<unsigned long long>(saved[k]));
  return -1;
}

// Runs node i's backward with cotangent grad; hands each returned gradient
// to the node of its slot.
int run_node(AG::BackwardGraph& g, std::vector<Node>& nodes, size_t i, PyObject* grad) {
  if (check_versions(nodes[i]) < 0) return -1;
  PyObject* op = nodes[i].op.get();
  PyObject* inputs = nodes[i].inputs.get();
  Ref r = Ref::steal(PyObject_CallMethod(op, "backward", "O", grad));
  if (!r) return -1;
  if (!PyTuple_Check(r.get()) && !PyList_Check(r.get())) {
    PyErr_Format(PyExc_TypeError, "%s.backward() must return a tuple or list of gradients, not %.100s",
                 type_name(op), Py_TYPE(r.get())->tp_name);
    return -1;
  }
  Ref seq = Ref::steal(PySequence_Tuple(r.get()));
  if (!seq) return -1;
  const Py_ssize_t count = PyTuple_GET_SIZE(inputs);
  if (PyTuple_GET_SIZE(seq.get()) != count) {
    PyErr_Format(PyExc_ValueError, "%s.backward() returned %zd gradients for %zd saved inputs", type_name(op),
                 PyTuple_GET_SIZE(seq.get()), count);
    return -1;
  }
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* gk = PyTuple_GET_ITEM(seq.get(), k);
    if (gk == Py_None || g.input_node(i, k) == AG::kNoNode) continue;
    if (autograd_check_cotangent(PyTuple_GET_ITEM(inputs, k), gk) < 0) {
      // Name the node: the contract error alone does not say who broke it.
      char where[64];
      std::snprintf(where, sizeof where, ".backward() gradient %zd: ", k);
      return add_error_context(type_name(op), where);
    }
    nodes[g.deliver(i, k)].grads.push_back(Ref::borrow(gk));
  }
  return 0;
}

// The implicit gradient 1 of a one-element root, in its layout.
PyObject* ones_like_scalar(PyObject* t) {
  TensorObject* tt = as_tensor(t);
  Ref one = Ref::steal(PyFloat_FromDouble(1.0));
  if (!one) return nullptr;
  const int64_t cos = layout_of(tt->layout).cosize();
  Ref list = Ref::steal(PyList_New(cos));
  if (!list) return nullptr;
  for (Py_ssize_t i = 0; i < cos; ++i) PyList_SET_ITEM(list.get(), i, one.new_ref());
  Ref c = Ref::steal(carrier_new_like(tt->carrier, list.get(), true, nullptr));
  if (!c) return nullptr;
  return tensor_new(c.get(), 0, tt->layout);
}

// Commits .grad of the committed nodes only when every sum succeeded, so a
// failed pass leaves every .grad untouched.
int commit_grads(const std::vector<Node>& nodes, const std::vector<size_t>& commit) {
  std::vector<Ref> fresh;
  fresh.reserve(commit.size());
  for (size_t c : commit) {
    const Node& n = nodes[c];
    TensorObject* t = as_tensor(n.tensor.get());
    std::vector<PyObject*> all;
    if (t->grad) all.push_back(t->grad);
    for (const Ref& r : n.grads) all.push_back(r.get());
    fresh.push_back(Ref::steal(gradient_for(n.tensor.get(), t->carrier, all)));
    if (!fresh.back()) return -1;
  }
  for (size_t c = 0; c < commit.size(); ++c)
    Py_XSETREF(as_tensor(nodes[commit[c]].tensor.get())->grad, fresh[c].release());
  return 0;
}

// The traversal proper; grad mode is already off. The graph's bookkeeping
// throws (a cycle: RuntimeError; std::bad_alloc); the caller translates.
int traverse(PyObject* root, PyObject* gradient, bool retain_graph) {
  AG::BackwardGraph g(root);
  std::vector<Node> nodes;
  if (discover(g, nodes) < 0) return -1;
  nodes[0].grads.push_back(Ref::borrow(gradient));
  g.start();
  for (size_t i; (i = g.next_ready()) != AG::kNoNode;) {
    Node& n = nodes[i];
    g.note_commit(i, as_tensor(n.tensor.get())->retains_grad);
    if (g.runs_backward(i)) {
      PyObject* like = as_tensor(n.grads[0].get())->carrier;
      Ref grad = n.grads.size() == 1 ? Ref::borrow(n.grads[0].get())
                                     : Ref::steal(gradient_for(n.tensor.get(), like, borrowed(n.grads)));
      if (!grad) return -1;
      if (run_node(g, nodes, i, grad.get()) < 0) return -1;
    }
    g.finish(i);
  }
  if (commit_grads(nodes, g.committed()) < 0) return -1;
  if (!retain_graph) {
    for (size_t i : g.produced()) {
      OperationObject* op = reinterpret_cast<OperationObject*>(nodes[i].op.get());
      op->graph_freed = true;
      Py_CLEAR(op->inputs);
      Py_CLEAR(op->versions);
    }
  }
  return 0;
}

}  // namespace

int autograd_check_cotangent(PyObject* target, PyObject* g) {
  if (!is_tensor(g)) {
    PyErr_Format(PyExc_TypeError, "gradient must be a Tensor, not %.100s", Py_TYPE(g)->tp_name);
    return -1;
  }
  if (tensor_reject_multi(g, "gradient") < 0) return -1;
  if (!differentiable(g)) {
    PyErr_Format(PyExc_TypeError, "gradient must be Float32 or Floating, not %s", dtype_label(as_tensor(g)->dtype));
    return -1;
  }
  int rel = carrier_is_released(as_tensor(g)->carrier);
  if (rel < 0) return -1;
  if (rel) {
    PyErr_Format(PyExc_RuntimeError, "the gradient's %s carrier is released", type_name(as_tensor(g)->carrier));
    return -1;
  }
  sw::CotangentFit fit = sw::CotangentFit::Ok;
  const sw::Layout& tl = layout_of(as_tensor(target)->layout);
  const sw::Layout& gl = layout_of(as_tensor(g)->layout);
  if (engine_call([&] { fit = sw::cotangent_fit(tl, gl); }) < 0) return -1;
  switch (fit) {
    case sw::CotangentFit::Ok:
      return 0;
    case sw::CotangentFit::ShapeDiffers:
      PyErr_Format(PyExc_ValueError,
                   "gradient shape %R does not match the tensor's shape %R (gradient layout contract)", shape_obj(g),
                   shape_obj(target));
      return -1;
    case sw::CotangentFit::NotOwnLayout:
      PyErr_Format(PyExc_ValueError, "gradient layout %R must equal the injective tensor's layout %R",
                   as_tensor(g)->layout, as_tensor(target)->layout);
      return -1;
    case sw::CotangentFit::NotInjective:
      PyErr_Format(PyExc_ValueError, "a broadcast tensor needs a gradient of its shape in an injective layout, got %R",
                   as_tensor(g)->layout);
      return -1;
  }
  return 0;
}

PyObject* tensor_backward(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"gradient", "retain_graph", nullptr};
  PyObject* gradient = Py_None;
  int retain_graph = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op:backward", const_cast<char**>(kwlist), &gradient,
                                   &retain_graph))
    return nullptr;
  if (tensor_reject_multi(self, "backward") < 0) return nullptr;
  if (!differentiable(self)) {
    PyErr_Format(PyExc_RuntimeError, "backward() on a non-differentiable %s tensor",
                 dtype_label(as_tensor(self)->dtype));
    return nullptr;
  }
  Ref g;
  if (gradient == Py_None) {
    if (layout_of(as_tensor(self)->layout).size() != 1) {
      PyErr_SetString(PyExc_RuntimeError, "backward() needs a gradient unless the tensor is a one-element scalar");
      return nullptr;
    }
    g = Ref::steal(ones_like_scalar(self));
    if (!g) return nullptr;
  } else {
    if (autograd_check_cotangent(self, gradient) < 0) return nullptr;
    g = Ref::borrow(gradient);
  }
  int rc = -1;
  {
    NoGrad off;
    // engine_call: the traversal's own bookkeeping may throw (std::bad_alloc).
    if (engine_call([&] { rc = traverse(self, g.get(), retain_graph != 0); }) < 0) rc = -1;
  }
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}

int autograd_module_init(PyObject*) { return 0; }

}  // namespace swpy

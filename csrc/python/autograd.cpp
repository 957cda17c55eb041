// Tensor.backward: the reverse-mode traversal.
//
// A pass discovers every differentiable tensor reachable from the root
// through autograd_ctx -> Operation.inputs(), counts for each tensor how many
// recorded consumers must contribute to it, then runs nodes in Kahn order so
// each node's backward runs once, after all its consumers contributed. Every
// gradient handed to a tensor must satisfy the cotangent layout contract
// (autograd_check_cotangent). Contributions to one tensor are summed into
// fresh storage. Leaves (and non-leaves that retain_grad()) get their .grad
// only when the whole pass succeeded, summed with any earlier .grad, in
// fresh storage obtained through the tensor's own carrier class (so it works
// after that carrier was released). Without retain_graph=True the visited
// nodes drop their saved inputs afterwards, and a later pass through them
// raises RuntimeError naming retain_graph=True. Backward hooks run with grad
// mode off.
#include <unordered_map>
#include <vector>

#include "kernels.hpp"
#include "sw.hpp"

namespace swpy {

namespace {

namespace K = sw::kernels;

const char* dtype_label(PyObject* d) {
  if (!d) return "?";
  if (dtype_code(d) == sw::DTypeCode::Compound) return _PyType_Name(Py_TYPE(d));
  return reinterpret_cast<DTypeObject*>(d)->name;
}

bool differentiable(PyObject* t) { return as_tensor(t)->dtype && dtype_is_differentiable(as_tensor(t)->dtype); }

PyObject* shape_obj(PyObject* t) { return reinterpret_cast<LayoutObject*>(as_tensor(t)->layout)->shape; }

int index_list(const K::Leaves& l, std::vector<int64_t>& out) {
  try {
    out.clear();
    sw::for_each_index(l, [&](int64_t, int64_t idx) { out.push_back(idx); });
    return 0;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return -1;
  }
}

// The sum of grads (Tensors of gl's shape, any layouts and carriers) laid
// out as gl at offset 0 in fresh storage of like's exact class. layout_obj
// (borrowed, may be NULL) is the Layout object to reuse for gl.
PyObject* sum_gradients(PyObject* like, const std::vector<PyObject*>& grads, const sw::Layout& gl,
                        PyObject* layout_obj) {
  bool host = PyObject_TypeCheck(like, &CPU_Type);
  if (host) {
    PyObject* d = carrier_dtype(like);
    if (!d) return nullptr;
    host = dtype_code(d) == sw::DTypeCode::Float32;
    Py_DECREF(d);
  }
  for (PyObject* g : grads) {
    TensorObject* t = as_tensor(g);
    if (!(layout_of(t->layout).shape() == gl.shape())) {
      PyErr_Format(PyExc_ValueError, "gradient of shape %R cannot accumulate into shape %R (layout mismatch)",
                   shape_obj(g), layout_obj ? reinterpret_cast<LayoutObject*>(layout_obj)->shape : Py_None);
      return nullptr;
    }
    int rel = carrier_is_released(t->carrier);
    if (rel < 0) return nullptr;
    if (rel) {
      PyErr_Format(PyExc_RuntimeError, "a gradient's %s carrier is released", _PyType_Name(Py_TYPE(t->carrier)));
      return nullptr;
    }
    if (dtype_code(t->dtype) != sw::DTypeCode::Float32 || !carrier_host_data(t->carrier)) host = false;
  }
  const int64_t cos = gl.cosize();
  PyObject* carrier = nullptr;
  if (host) {
    // One or two contributions are exact in binary32 (a copy, one rounded
    // sum); more accumulate in double and round once.
    const bool direct = grads.size() <= 2;
    void* data = nullptr;
    carrier = ops_alloc_host(like, cos, sw::DTypeCode::Float32, direct && cos != gl.size(), &data);
    if (!carrier) return nullptr;
    float* out = static_cast<float*>(data);
    auto ptr = [](PyObject* g) {
      TensorObject* t = as_tensor(g);
      return static_cast<const float*>(carrier_host_data(t->carrier)) + t->offset;
    };
    auto leaves = [](PyObject* g) -> const K::Leaves& { return layout_of(as_tensor(g)->layout).leaves(); };
    try {
      if (grads.size() == 1) {
        K::copy(sw::DTypeCode::Float32, ptr(grads[0]), leaves(grads[0]), out, gl.leaves());
      } else if (grads.size() == 2) {
        K::add(sw::DTypeCode::Float32, ptr(grads[0]), leaves(grads[0]), ptr(grads[1]), leaves(grads[1]), out,
               gl.leaves());
      } else {
        std::vector<double> acc(static_cast<size_t>(cos), 0.0);
        for (PyObject* g : grads) K::sum_into(ptr(g), leaves(g), acc.data(), gl.leaves());
        K::round_to_f32(acc.data(), out, cos);
      }
    } catch (const std::bad_alloc&) {
      Py_DECREF(carrier);
      return PyErr_NoMemory();
    } catch (const std::invalid_argument& e) {
      Py_DECREF(carrier);
      PyErr_Format(PyExc_ValueError, "gradient accumulation: %s", e.what());
      return nullptr;
    }
  } else {
    std::vector<int64_t> io, ig;
    if (index_list(gl.leaves(), io) < 0) return nullptr;
    PyObject* list = PyList_New(cos);
    if (!list) return nullptr;
    for (Py_ssize_t i = 0; i < cos; ++i) {
      PyObject* z = PyFloat_FromDouble(0.0);
      if (!z) { Py_DECREF(list); return nullptr; }
      PyList_SET_ITEM(list, i, z);
    }
    for (PyObject* g : grads) {
      TensorObject* t = as_tensor(g);
      if (index_list(layout_of(t->layout).leaves(), ig) < 0) { Py_DECREF(list); return nullptr; }
      for (size_t k = 0; k < ig.size(); ++k) {
        PyObject* v = carrier_get(t->carrier, t->offset + static_cast<Py_ssize_t>(ig[k]));
        if (!v) { Py_DECREF(list); return nullptr; }
        PyObject* old = PyList_GET_ITEM(list, io[k]);
        PyObject* s = PyNumber_Add(old, v);
        Py_DECREF(v);
        if (!s) { Py_DECREF(list); return nullptr; }
        PyList_SET_ITEM(list, io[k], s);
        Py_DECREF(old);
      }
    }
    carrier = carrier_new_like(like, list, true, nullptr);
    Py_DECREF(list);
    if (!carrier) return nullptr;
  }
  PyObject* lo = layout_obj ? Py_NewRef(layout_obj) : layout_from_engine(gl);
  if (!lo) { Py_DECREF(carrier); return nullptr; }
  PyObject* r = tensor_new(carrier, 0, lo);
  Py_DECREF(lo);
  Py_DECREF(carrier);
  return r;
}

// Sum of grads for tensor t in t's gradient layout, created through like.
PyObject* gradient_for(PyObject* t, PyObject* like, const std::vector<PyObject*>& grads) {
  const sw::Layout& tl = layout_of(as_tensor(t)->layout);
  try {
    sw::Layout gl = grad_layout_for(tl);
    return sum_gradients(like, grads, gl, gl == tl ? as_tensor(t)->layout : nullptr);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
}

struct Node {
  PyObject* tensor = nullptr;    // strong
  PyObject* op = nullptr;        // strong; NULL for a leaf
  PyObject* inputs = nullptr;    // strong; the op's saved inputs at discovery
  PyObject* versions = nullptr;  // strong
  int pending = 0;               // consumers that have not run yet
  std::vector<PyObject*> grads;  // strong; contributions
};

struct Graph {
  std::vector<Node> nodes;
  std::unordered_map<PyObject*, size_t> index;

  ~Graph() {
    for (Node& n : nodes) {
      Py_XDECREF(n.tensor);
      Py_XDECREF(n.op);
      Py_XDECREF(n.inputs);
      Py_XDECREF(n.versions);
      for (PyObject* g : n.grads) Py_DECREF(g);
    }
  }

  size_t add(PyObject* t) {
    auto it = index.find(t);
    if (it != index.end()) return it->second;
    Node n;
    n.tensor = Py_NewRef(t);
    nodes.push_back(std::move(n));
    index.emplace(t, nodes.size() - 1);
    return nodes.size() - 1;
  }
};

const char* op_label(PyObject* op) { return _PyType_Name(Py_TYPE(op)); }

int freed_error(PyObject* op) {
  PyErr_Format(PyExc_RuntimeError,
               "the graph through %s was already freed by a backward pass; use retain_graph=True on the first "
               "backward to run backward through it again",
               op_label(op));
  return -1;
}

// Discovers the graph reachable from root (already node 0).
int discover(Graph& g) {
  std::vector<size_t> stack = {0};
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    PyObject* ctx = as_tensor(g.nodes[i].tensor)->autograd_ctx;
    if (!ctx || ctx == Py_None) continue;
    if (!is_operation(ctx)) {
      PyErr_Format(PyExc_TypeError, "autograd_ctx must be an Operation, not %.100s", Py_TYPE(ctx)->tp_name);
      return -1;
    }
    OperationObject* op = reinterpret_cast<OperationObject*>(ctx);
    if (op->graph_freed) return freed_error(ctx);
    g.nodes[i].op = Py_NewRef(ctx);
    if (!op->inputs) continue;
    if (!PyTuple_Check(op->inputs) || !op->versions || !PyTuple_Check(op->versions) ||
        PyTuple_GET_SIZE(op->versions) != PyTuple_GET_SIZE(op->inputs)) {
      PyErr_Format(PyExc_RuntimeError, "%s has inconsistent saved inputs", op_label(ctx));
      return -1;
    }
    g.nodes[i].inputs = Py_NewRef(op->inputs);
    g.nodes[i].versions = Py_NewRef(op->versions);
    PyObject* inputs = g.nodes[i].inputs;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(inputs); ++k) {
      PyObject* in = PyTuple_GET_ITEM(inputs, k);
      if (!is_tensor(in) || !differentiable(in)) continue;
      const size_t before = g.nodes.size();
      const size_t j = g.add(in);  // may reallocate g.nodes
      g.nodes[j].pending += 1;
      if (j == before) stack.push_back(j);
    }
  }
  return 0;
}

int check_versions(const Node& n) {
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(n.inputs); ++k) {
    PyObject* in = PyTuple_GET_ITEM(n.inputs, k);
    if (!is_tensor(in)) continue;
    PyObject* c = as_tensor(in)->carrier;
    const unsigned long long now = c ? as_carrier(c)->version : 0;
    const unsigned long long saved = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(n.versions, k));
    if (saved == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return -1;
    if (now != saved) {
      PyErr_Format(PyExc_RuntimeError,
                   "input %zd saved by %s was modified in-place after the forward pass (version %llu, saved "
                   "version %llu)",
                   k, op_label(n.op), now, saved);
      return -1;
    }
  }
  return 0;
}

// Runs one non-leaf node with cotangent grad; appends the returned gradients
// to the inputs' nodes.
int run_node(Graph& g, size_t i, PyObject* grad) {
  Node& n = g.nodes[i];
  if (check_versions(n) < 0) return -1;
  PyObject* r = PyObject_CallMethod(n.op, "backward", "O", grad);
  if (!r) return -1;
  if (!PyTuple_Check(r) && !PyList_Check(r)) {
    PyErr_Format(PyExc_TypeError, "%s.backward() must return a tuple or list of gradients, not %.100s",
                 op_label(n.op), Py_TYPE(r)->tp_name);
    Py_DECREF(r);
    return -1;
  }
  PyObject* seq = PySequence_Tuple(r);
  Py_DECREF(r);
  if (!seq) return -1;
  const Py_ssize_t count = PyTuple_GET_SIZE(n.inputs);
  if (PyTuple_GET_SIZE(seq) != count) {
    PyErr_Format(PyExc_ValueError, "%s.backward() returned %zd gradients for %zd saved inputs", op_label(n.op),
                 PyTuple_GET_SIZE(seq), count);
    Py_DECREF(seq);
    return -1;
  }
  for (Py_ssize_t k = 0; k < count; ++k) {
    PyObject* gk = PyTuple_GET_ITEM(seq, k);
    PyObject* in = PyTuple_GET_ITEM(g.nodes[i].inputs, k);
    if (gk == Py_None || !is_tensor(in) || !differentiable(in)) continue;
    if (autograd_check_cotangent(in, gk) < 0) {
      // Name the node: the contract error alone does not say who broke it.
      PyObject *et, *ev, *tb;
      PyErr_Fetch(&et, &ev, &tb);
      PyErr_NormalizeException(&et, &ev, &tb);
      PyObject* msg = ev ? PyObject_Str(ev) : nullptr;
      if (msg) {
        PyErr_Format(et, "%s.backward() gradient %zd: %U", op_label(g.nodes[i].op), k, msg);
        Py_DECREF(msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
      } else {
        PyErr_Restore(et, ev, tb);
      }
      Py_DECREF(seq);
      return -1;
    }
    g.nodes[g.index.at(in)].grads.push_back(Py_NewRef(gk));
  }
  Py_DECREF(seq);
  return 0;
}

// The implicit gradient 1 of a one-element root, in its layout.
PyObject* ones_like_scalar(PyObject* t) {
  TensorObject* tt = as_tensor(t);
  PyObject* one = PyFloat_FromDouble(1.0);
  if (!one) return nullptr;
  const int64_t cos = layout_of(tt->layout).cosize();
  PyObject* list = PyList_New(cos);
  if (!list) { Py_DECREF(one); return nullptr; }
  for (Py_ssize_t i = 0; i < cos; ++i) PyList_SET_ITEM(list, i, Py_NewRef(one));
  Py_DECREF(one);
  PyObject* c = carrier_new_like(tt->carrier, list, true, nullptr);
  Py_DECREF(list);
  if (!c) return nullptr;
  PyObject* r = tensor_new(c, 0, tt->layout);
  Py_DECREF(c);
  return r;
}

// The traversal proper; grad mode is already off.
int traverse(PyObject* root, PyObject* gradient, bool retain_graph) {
  Graph g;
  g.add(root);
  g.nodes[0].grads.push_back(Py_NewRef(gradient));
  if (discover(g) < 0) return -1;
  if (g.nodes[0].pending != 0) {
    PyErr_SetString(PyExc_RuntimeError, "the autograd graph contains a cycle through the tensor backward started from");
    return -1;
  }
  std::vector<size_t> ready = {0};
  std::vector<size_t> commit;
  size_t processed = 0;
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    ++processed;
    Node& n = g.nodes[i];
    TensorObject* t = as_tensor(n.tensor);
    if (!n.grads.empty() && (!n.op || t->retains_grad)) commit.push_back(i);
    if (n.op && n.inputs && !n.grads.empty()) {
      PyObject* grad = n.grads.size() == 1 ? Py_NewRef(n.grads[0])
                                           : gradient_for(n.tensor, as_tensor(n.grads[0])->carrier, n.grads);
      if (!grad) return -1;
      int rc = run_node(g, i, grad);
      Py_DECREF(grad);
      if (rc < 0) return -1;
    }
    if (g.nodes[i].inputs) {
      PyObject* inputs = g.nodes[i].inputs;
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(inputs); ++k) {
        PyObject* in = PyTuple_GET_ITEM(inputs, k);
        if (!is_tensor(in) || !differentiable(in)) continue;
        const size_t j = g.index.at(in);
        if (--g.nodes[j].pending == 0) ready.push_back(j);
      }
    }
  }
  if (processed != g.nodes.size()) {
    PyErr_SetString(PyExc_RuntimeError, "the autograd graph contains a cycle");
    return -1;
  }
  // Commit .grad only now, so a failed pass leaves every .grad untouched.
  std::vector<PyObject*> fresh(commit.size(), nullptr);
  for (size_t c = 0; c < commit.size(); ++c) {
    Node& n = g.nodes[commit[c]];
    TensorObject* t = as_tensor(n.tensor);
    std::vector<PyObject*> all;
    if (t->grad) all.push_back(t->grad);
    all.insert(all.end(), n.grads.begin(), n.grads.end());
    fresh[c] = gradient_for(n.tensor, t->carrier, all);
    if (!fresh[c]) {
      for (PyObject* f : fresh) Py_XDECREF(f);
      return -1;
    }
  }
  for (size_t c = 0; c < commit.size(); ++c) Py_XSETREF(as_tensor(g.nodes[commit[c]].tensor)->grad, fresh[c]);
  if (!retain_graph) {
    for (Node& n : g.nodes) {
      if (!n.op) continue;
      OperationObject* op = reinterpret_cast<OperationObject*>(n.op);
      op->graph_freed = true;
      Py_CLEAR(op->inputs);
      Py_CLEAR(op->versions);
    }
  }
  return 0;
}

}  // namespace

sw::Layout grad_layout_for(const sw::Layout& l) {
  if (l.is_injective()) return l;
  return sw::Layout::canonical(l.shape());
}

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
    PyErr_Format(PyExc_RuntimeError, "the gradient's %s carrier is released",
                 _PyType_Name(Py_TYPE(as_tensor(g)->carrier)));
    return -1;
  }
  const sw::Layout& tl = layout_of(as_tensor(target)->layout);
  const sw::Layout& gl = layout_of(as_tensor(g)->layout);
  if (!(gl.shape() == tl.shape())) {
    PyErr_Format(PyExc_ValueError, "gradient shape %R does not match the tensor's shape %R (gradient layout contract)",
                 shape_obj(g), shape_obj(target));
    return -1;
  }
  if (tl.is_injective()) {
    if (!(gl == tl)) {
      PyErr_Format(PyExc_ValueError, "gradient layout %R must equal the injective tensor's layout %R",
                   as_tensor(g)->layout, as_tensor(target)->layout);
      return -1;
    }
  } else if (!gl.is_injective()) {
    PyErr_Format(PyExc_ValueError,
                 "a broadcast tensor needs a gradient of its shape in an injective layout, got %R",
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
  PyObject* g;
  if (gradient == Py_None) {
    if (layout_of(as_tensor(self)->layout).size() != 1) {
      PyErr_SetString(PyExc_RuntimeError,
                      "backward() needs a gradient unless the tensor is a one-element scalar");
      return nullptr;
    }
    g = ones_like_scalar(self);
    if (!g) return nullptr;
  } else {
    if (autograd_check_cotangent(self, gradient) < 0) return nullptr;
    g = Py_NewRef(gradient);
  }
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  int rc = traverse(self, g, retain_graph != 0);
  set_grad_enabled(prev);
  Py_DECREF(g);
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}

int autograd_module_init(PyObject*) { return 0; }

}  // namespace swpy

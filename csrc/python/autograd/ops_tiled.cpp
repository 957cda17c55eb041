// Full TiledEvictable tensors in autograd (see ops_support.hpp): the dense
// path of the direct operations (every tile copied into one carrier of the
// primary's class, in the tensor's layout), the reader the tile-by-tile path
// uses (ops_tiled_bands.cpp), the gradients of tiled inputs (a fresh
// TiledEvictable whose all-zero tiles stay implicit), their tile-by-tile
// accumulation, and the visible nodes of projection and scatter. The tile
// rules are the engine's (csrc/engine/tiled/); the carriers and requests
// are the TiledEvictable family's (tiled_object.hpp).
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>

#include "autograd/ops_support.hpp"
#include "autograd/ops_tiled.hpp"
#include "tiled_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "profiler_api.hpp"
#include "runtime/clock.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace T = sw::tiled;

using ops::Operand;

PyObject* ops::tiled_option(const char* name) {
  PyObject* o = module_state.tiled.options;
  if (!o) return nullptr;
  PyObject* v = PyObject_GetAttrString(o, name);
  if (!v) PyErr_Clear();
  return v;
}

namespace {

// Runs plan on te on this thread (registered while it runs), the places
// Compact / Target / Out mapped to the given carriers. 0 / -1.
int run_plan(PyObject* te, T::Plan&& plan, PyObject* compact, PyObject* target, PyObject* out) {
  TiledRequest* req = tiled_register(te, std::move(plan));
  if (!req) return -1;
  req->compact = Ref::borrow(compact);
  req->target = Ref::borrow(target);
  req->out = Ref::borrow(out);
  TiledState& s = tiled_state(te);
  if (out && s.tokens.count(out)) req->access.emplace_back(out, s.tokens[out]);
  const int rc = tiled_run_here(req);
  tiled_end(req, rc == 0);
  delete req;
  return rc;
}

// Records a dense copy's purpose for a test's spy list (tiled_option).
void spy(const char* purpose) {
  Ref l = Ref::steal(ops::tiled_option("dense_spy"));
  if (!l || !PyList_Check(l.get())) return;
  Ref p = Ref::steal(PyUnicode_FromString(purpose));
  if (!p || PyList_Append(l.get(), p.get()) < 0) PyErr_Clear();
}

// A request reading every tile of te, with the residency policy's plan for
// purpose folded in (its evictions in *pol). 0 / -1.
int plan_read_all(PyObject* te, const char* purpose, T::Plan* p, PolicyPlan* pol) {
  TiledState& s = tiled_state(te);
  if (tiled_consult(te, purpose, {}, true, pol) < 0 || tiled_check_live(te) < 0) return -1;
  const T::Planner planner(s.geom, s.res);
  if (T::Refusal why = planner.read_all(p)) return tiled_raise_refusal(te, why, "it holds no value"), -1;
  planner.policy(pol->promote, pol->retain, p);
  return 0;
}

// Every tile of te's full tensor with association a copied, physically,
// into slot base(k) of a fresh carrier of the primary's class (implicit
// tiles zero), while a request reading every tile holds them. purpose: what
// the policy is told. New reference to the carrier.
PyObject* dense_copy(PyObject* te, const char* purpose) {
  spy(purpose);
  TiledState& s = tiled_state(te);
  PolicyPlan pol;
  T::Plan p;
  if (plan_read_all(te, purpose, &p, &pol) < 0) return nullptr;
  const T::Planner planner(s.geom, s.res);
  const bool implicit = s.res.count(T::Location::Implicit) > 0;
  Ref dest = Ref::steal(carrier_allocate_like(s.proto.get(), s.geom.slots(), true, nullptr, !implicit));
  if (!dest) return nullptr;
  for (int64_t k = 0; k < s.geom.tiles(); ++k) {
    const T::Source src = T::source_of(s.geom, s.res, k);
    if (src.place == T::Place::Zeros) continue;
    T::Unit u;
    planner.move_tile(k, src, T::Place::Target, s.geom.base(k), false, &u);
    p.units.push_back(std::move(u));
  }
  TiledRequest* req = tiled_register(te, std::move(p));
  if (!req) return nullptr;
  req->target = Ref::borrow(dest.get());
  req->evict = std::move(pol.evict);
  const int rc = tiled_run_here(req);
  tiled_end(req, rc == 0);
  delete req;
  return rc < 0 ? nullptr : dest.release();
}

int materialize(Operand* o, const char* op, const char* what, const char* purpose) {
  PyObject* te = o->tiled;
  PyTypeObject* cls = o->cls;
  Ref c = Ref::steal(dense_copy(te, purpose));
  Ref d = c ? Ref::steal(tensor_new(c.get(), 0, as_tensor(o->tensor)->layout)) : Ref();
  if (!d) {
    if (!PyErr_ExceptionMatches(PyExc_MemoryError)) add_error_context(op, what);
    return -1;
  }
  if (view_operand(d.get(), op, o) < 0) return -1;
  o->host = carrier_host_data(o->carrier);
  o->cls = cls;
  o->tiled = te;
  o->dense = std::move(d);
  return 0;
}

// Ordinals of te's tiles whose slots are all zero in the Float32 host
// gradient g (offset 0, laid out as te's tensor).
std::vector<int64_t> zero_tiles(PyObject* te, PyObject* g) {
  std::vector<int64_t> out;
  TensorObject* gt = as_tensor(g);
  const float* data = static_cast<const float*>(carrier_host_data(gt->carrier));
  const T::Geometry& geo = tiled_state(te).geom;
  if (!data || gt->offset != 0 || dtype_code(gt->dtype) != sw::DTypeCode::Float32 ||
      carrier_size(gt->carrier) < geo.slots())
    return out;
  for (int64_t k = 0; k < geo.tiles(); ++k) {
    bool zero = true;
    for (int64_t j = 0; j < geo.run_count() && zero; ++j) {
      const float* p = data + geo.base(k) + geo.run_offset(j);
      for (int64_t i = 0; i < geo.run_length() && zero; ++i) zero = p[i] == 0.0f;
    }
    if (zero) out.push_back(k);
  }
  return out;
}

// A fresh gradient TiledEvictable of te from the dense g (te's tensor's
// layout): the tiles not in zeros become primary and dirty, taking g's
// storage as the slab when adopt allows (the exact primary class, offset 0,
// every slot, unowned), else copied into a fresh slab.
PyObject* gradient_of(PyObject* te, PyObject* g, const std::vector<int64_t>& zeros, bool adopt) {
  TiledState& s = tiled_state(te);
  Ref out = Ref::steal(tiled_fresh(te, true));
  if (!out) return nullptr;
  TiledState& o = tiled_state(out.get());
  if (static_cast<int64_t>(zeros.size()) == s.geom.tiles()) return out.release();
  TensorObject* gt = as_tensor(g);
  PyObject* c = gt->carrier;
  if (adopt && Py_TYPE(c) == tiled_primary_class(te) && gt->offset == 0 && carrier_size(c) == s.geom.slots() &&
      dtype_code(gt->dtype) == s.dtype && !carrier_is_owned(c) && !carrier_is_released(c)) {
    if (tiled_claim(o, c) < 0) return nullptr;
    o.slab = Ref::borrow(c);
  } else {
    PyErr_Clear();
    PyObject* slab = tiled_ensure_slab(out.get());
    if (!slab) return nullptr;
    T::Plan p;
    const T::Planner planner(o.geom, o.res);
    for (int64_t k = 0; k < s.geom.tiles(); ++k) {
      if (std::binary_search(zeros.begin(), zeros.end(), k)) continue;
      T::Unit u;
      planner.move_tile(k, {T::Place::Compact, gt->offset + s.geom.base(k), false}, T::Place::Out, s.geom.base(k),
                        false, &u);
      p.units.push_back(std::move(u));
    }
    // (the tiles live in the slab from here: a fresh carrier nobody else reads)
    for (int64_t k = 0; k < s.geom.tiles(); ++k)
      if (!std::binary_search(zeros.begin(), zeros.end(), k)) o.res.set(k, T::Location::Primary, true, nullptr, nullptr);
    return run_plan(out.get(), std::move(p), c, nullptr, slab) < 0 ? nullptr : out.release();
  }
  for (int64_t k = 0; k < s.geom.tiles(); ++k)
    if (!std::binary_search(zeros.begin(), zeros.end(), k)) o.res.set(k, T::Location::Primary, true, nullptr, nullptr);
  return out.release();
}

// ------------------------------------------------------------ projection and scatter nodes

struct TiledNodeObject {
  OperationObject base;
  PyObject* te;      // the TiledEvictable whose geometry the node works in
  PyObject* layout;  // the full tensor's Layout object
  std::vector<int64_t>* tiles;
  std::vector<int64_t>* cgrid;
  bool add;
};
TiledNodeObject* as_node(PyObject* o) { return reinterpret_cast<TiledNodeObject*>(o); }

PyTypeObject ProjectOperation_Type = static_type("strideweave._core._ProjectOperation", sizeof(TiledNodeObject));
PyTypeObject ScatterOperation_Type = static_type("strideweave._core._ScatterOperation", sizeof(TiledNodeObject));

int Node_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_node(self)->te);
  Py_VISIT(as_node(self)->layout);
  return Operation_Type.tp_traverse(self, visit, arg);
}

int Node_clear(PyObject* self) {
  Py_CLEAR(as_node(self)->te);
  Py_CLEAR(as_node(self)->layout);
  return Operation_Type.tp_clear(self);
}

void Node_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Node_clear(self);
  delete as_node(self)->tiles;
  delete as_node(self)->cgrid;
  if (reinterpret_cast<OperationObject*>(self)->weakreflist) PyObject_ClearWeakRefs(self);
  Py_TYPE(self)->tp_free(self);
}

// The compact tensor of the selection gathered from the full tensor g (te's
// geometry: a TiledEvictable-backed tensor or a dense one in a compatible
// layout), in a fresh carrier of te's primary class.
PyObject* gather(TiledNodeObject* n, PyObject* g) {
  PyObject* te = n->te;
  const T::Geometry& geo = tiled_state(te).geom;
  const T::Geometry cg = geo.regrid(*n->cgrid);
  const auto tv = T::compact_view(cg.layout(), 0, geo.tile(), *n->cgrid);
  Ref lay = Ref::steal(layout_from_engine(cg.layout()));
  Ref dest = lay ? Ref::steal(carrier_allocate_like(tiled_state(te).proto.get(), cg.slots(), true, nullptr, false))
                 : Ref();
  if (!dest) return nullptr;
  PyObject* gc = as_tensor(g)->carrier;
  T::Association a;
  if (is_tiled(gc)) {
    if (tiled_check_tensor(gc, g, "the cotangent", &a) < 0) return nullptr;
    TiledState& gs = tiled_state(gc);
    T::Plan p;
    if (T::Refusal why = T::Planner(gs.geom, gs.res).project(*n->tiles, a, *tv, true, &p))
      return tiled_raise_refusal(gc, why, "it holds no value"), nullptr;
    if (run_plan(gc, std::move(p), nullptr, dest.get(), nullptr) < 0) return nullptr;
  } else {
    T::Incompatible why = geo.check(layout_of(as_tensor(g)->layout), 0, &a);
    if (why) {
      PyErr_SetString(PyExc_ValueError, geo.message(why).c_str());
      return nullptr;
    }
    TiledState& s = tiled_state(te);
    T::Plan p;
    const T::Planner planner(s.geom, s.res);
    for (size_t j = 0; j < n->tiles->size(); ++j) {
      const int64_t k = (*n->tiles)[j];
      T::Unit u;
      planner.copy_tile(k, T::Place::Compact, a.within, as_tensor(g)->offset + geo.base(k), T::Place::Target,
                        tv->within, tv->bases[j], false, &u);
      p.units.push_back(std::move(u));
    }
    if (run_plan(te, std::move(p), gc, dest.get(), nullptr) < 0) return nullptr;
  }
  return tensor_new(dest.get(), 0, lay.get());
}

// A fresh implicit-zero TiledEvictable gradient (te's geometry) of a full
// tensor laid out as n->layout, the compact g scatter-added at the selection.
PyObject* scatter_add(TiledNodeObject* n, PyObject* g) {
  PyObject* te = n->te;
  const T::Geometry& geo = tiled_state(te).geom;
  T::Association a;
  T::Incompatible why = geo.check(layout_of(n->layout), 0, &a);
  const T::Geometry cg = geo.regrid(*n->cgrid);
  const auto cv = T::compact_view(layout_of(as_tensor(g)->layout), as_tensor(g)->offset, geo.tile(), *n->cgrid);
  if (why || !cv) {
    PyErr_SetString(PyExc_ValueError, "the compact cotangent does not fit the selection");
    return nullptr;
  }
  Ref out = Ref::steal(tiled_fresh(te, true));
  PyObject* slab = out ? tiled_ensure_slab(out.get()) : nullptr;
  if (!slab) return nullptr;
  TiledState& o = tiled_state(out.get());
  T::Plan p;
  const T::Planner planner(o.geom, o.res);
  for (size_t j = 0; j < n->tiles->size(); ++j) {
    T::Unit u;
    const int64_t k = (*n->tiles)[j];
    planner.copy_tile(k, T::Place::Compact, cv->within, cv->bases[j], T::Place::Out, a.within, geo.base(k), true, &u);
    p.units.push_back(std::move(u));
    o.res.set(k, T::Location::Primary, true, nullptr, nullptr);  // in the slab from here (a private carrier)
  }
  if (run_plan(out.get(), std::move(p), as_tensor(g)->carrier, nullptr, slab) < 0) return nullptr;
  return tensor_new(out.get(), 0, n->layout);
}

PyObject* Project_backward(PyObject* self, PyObject* g) {
  if (!is_tensor(g)) {
    PyErr_Format(PyExc_TypeError, "_ProjectOperation.backward() needs a Tensor, not %.100s", type_name(g));
    return nullptr;
  }
  Ref grad = Ref::steal(scatter_add(as_node(self), g));
  return grad ? PyTuple_Pack(1, grad.get()) : nullptr;
}

PyObject* Scatter_backward(PyObject* self, PyObject* g) {
  if (!is_tensor(g)) {
    PyErr_Format(PyExc_TypeError, "_ScatterOperation.backward() needs a Tensor, not %.100s", type_name(g));
    return nullptr;
  }
  Ref compact = Ref::steal(gather(as_node(self), g));
  if (!compact) return nullptr;
  Ref tmpl = as_node(self)->add ? Ref::steal(scatter_add(as_node(self), compact.get())) : Ref::borrow(Py_None);
  return tmpl ? PyTuple_Pack(2, compact.get(), tmpl.get()) : nullptr;
}

PyMethodDef Project_methods[] = {
    {"backward", Project_backward, METH_O,
     "Scatter-adds the compact cotangent into a fresh TiledEvictable gradient (untouched tiles implicit zero)."},
    {nullptr, nullptr, 0, nullptr}};
PyMethodDef Scatter_methods[] = {
    {"backward", Scatter_backward, METH_O,
     "The full cotangent projected at the selection for compact; for 'add' also scatter-added for the template."},
    {nullptr, nullptr, 0, nullptr}};

// result (stolen) with a fresh node of type attached: inputs and their
// versions now.
PyObject* attach(PyTypeObject* type, PyObject* te, PyObject* full, std::initializer_list<PyObject*> inputs,
                 PyObject* result, const std::vector<int64_t>& tiles, const std::vector<int64_t>& cgrid, bool add) {
  Ref r = Ref::steal(result);
  Ref node = Ref::steal(type->tp_alloc(type, 0));
  if (!node) return nullptr;
  TiledNodeObject* n = as_node(node.get());
  n->te = Py_NewRef(te);
  n->layout = Py_NewRef(as_tensor(full)->layout);
  n->add = add;
  if (engine_call([&] {
        n->tiles = new std::vector<int64_t>(tiles);
        n->cgrid = new std::vector<int64_t>(cgrid);
      }) < 0)
    return nullptr;
  Ref ins = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(inputs.size())));
  Ref vers = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(inputs.size())));
  if (!ins || !vers) return nullptr;
  Py_ssize_t i = 0;
  for (PyObject* t : inputs) {
    PyObject* v = PyLong_FromUnsignedLongLong(as_carrier(as_tensor(t)->carrier)->version);
    if (!v) return nullptr;
    PyTuple_SET_ITEM(ins.get(), i, Py_NewRef(t));
    PyTuple_SET_ITEM(vers.get(), i++, v);
  }
  n->base.inputs = ins.release();
  n->base.versions = vers.release();
  Py_XSETREF(as_tensor(r.get())->autograd_ctx, node.release());
  return r.release();
}

}  // namespace

PyObject* tiled_gather_node(PyObject* te, PyObject* source, PyObject* result, const std::vector<int64_t>& tiles,
                            const std::vector<int64_t>& cgrid) {
  return attach(&ProjectOperation_Type, te, source, {source}, result, tiles, cgrid, false);
}

PyObject* tiled_scatter_node(PyObject* te, PyObject* compact, PyObject* full, PyObject* result,
                             const std::vector<int64_t>& tiles, const std::vector<int64_t>& cgrid, bool add) {
  return attach(&ScatterOperation_Type, te, full, {compact, full}, result, tiles, cgrid, add);
}

int tiled_nodes_init(PyObject* module) {
  struct {
    PyTypeObject* t;
    const char* name;
    PyMethodDef* m;
    const char* doc;
  } types[] = {{&ProjectOperation_Type, "_ProjectOperation", Project_methods,
                "The visible gather node of a TiledEvictable projection."},
               {&ScatterOperation_Type, "_ScatterOperation", Scatter_methods,
                "The visible node of a TiledEvictable scatter."}};
  for (auto& e : types) {
    e.t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
    e.t->tp_base = &Operation_Type;
    e.t->tp_doc = e.doc;
    e.t->tp_methods = e.m;
    e.t->tp_traverse = Node_traverse;
    e.t->tp_clear = Node_clear;
    e.t->tp_dealloc = Node_dealloc;
    if (add_type(module, e.t, e.name) < 0) return -1;
  }
  return 0;
}

namespace ops {

bool is_tiled_carrier(PyObject* c) { return is_tiled(c); }

int tiled_operand(const char* op, Operand* o) {
  if (!is_tiled(o->carrier)) return 0;
  if (tiled_check_live(o->carrier) < 0) return add_error_context(op, "(): ");
  PyTypeObject* cls = tiled_primary_class(o->carrier);
  if (!PyType_IsSubtype(cls, &CPU_Type) && !PyType_IsSubtype(cls, &Generic_Type)) {
    PyErr_Format(PyExc_TypeError,
                 "%s() supports CPU and Generic tensors; a TiledEvictable computes in its primary's class, %s", op,
                 type_name(cls));
    return -1;
  }
  o->tiled = o->carrier;
  o->cls = cls;
  // The tile-footprint rule, before the other operand is even looked at.
  if (tiled_check_tensor(o->carrier, o->tensor, "operand", nullptr) < 0) return add_error_context(op, "(): ");
  return 1;
}

int ready_operands(Operand* a, Operand* b, const char* op) {
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
  if (o->host || !is_tiled(o->carrier)) return 0;
  if (tiled_check_live(o->carrier) < 0) return add_error_context(op, " backward: ");
  o->tiled = o->carrier;
  o->cls = tiled_primary_class(o->carrier);
  return materialize(o, op, " backward: ", "backward");
}

PyObject* input_gradient(PyObject* x, PyObject* grad, const char* op, bool fresh) {
  Ref g = Ref::steal(grad);
  if (!g) return nullptr;
  PyObject* c = as_tensor(x)->carrier;
  if (!is_tiled(c)) return g.release();
  if (!as_tensor(g.get())->layout || !(layout_of(as_tensor(g.get())->layout) == layout_of(as_tensor(x)->layout))) {
    PyErr_Format(PyExc_ValueError, "%s backward: the dense gradient must have the operand's Layout", op);
    return nullptr;
  }
  if (!reinterpret_cast<TiledObject*>(c)->s) {
    PyErr_Format(PyExc_RuntimeError, "%s backward: TiledEvictable is not initialised", op);
    return nullptr;
  }
  Ref out = Ref::steal(gradient_of(c, g.get(), zero_tiles(c, g.get()), fresh));
  if (!out) return nullptr;
  return tensor_new(out.get(), 0, as_tensor(x)->layout);
}

PyObject* tiled_sum_gradients(PyObject* t, PyObject* te, const std::vector<PyObject*>& grads) {
  // (a released carrier's gradients still sum: only its geometry and tier
  // classes are used)
  if (!reinterpret_cast<TiledObject*>(te)->s || as_tensor(t)->offset != 0) Py_RETURN_NOTIMPLEMENTED;
  TiledState& s = tiled_state(te);
  T::Association w;
  if (s.geom.check(layout_of(as_tensor(t)->layout), 0, &w)) Py_RETURN_NOTIMPLEMENTED;
  const sw::Layout& lay = layout_of(as_tensor(t)->layout);
  for (PyObject* g : grads) {
    if (!is_tensor(g) || !(layout_of(as_tensor(g)->layout) == lay)) Py_RETURN_NOTIMPLEMENTED;
    PyObject* c = as_tensor(g)->carrier;
    if (is_tiled(c)) {
      TiledObject* o = reinterpret_cast<TiledObject*>(c);
      if (!o->s || o->s->released || as_tensor(g)->offset != 0 || o->s->geom.grid() != s.geom.grid() ||
          o->s->geom.tile() != s.geom.tile() || o->s->geom.kind() != s.geom.kind())
        Py_RETURN_NOTIMPLEMENTED;
    } else if (Py_TYPE(c) != tiled_primary_class(te) || carrier_is_released(c) ||
               dtype_code(as_tensor(g)->dtype) != s.dtype) {
      Py_RETURN_NOTIMPLEMENTED;
    }
  }
  Ref out = Ref::steal(tiled_fresh(te, true));
  if (!out) return nullptr;
  TiledState& o = tiled_state(out.get());
  const T::Planner planner(o.geom, o.res);
  // Physical tile association (the footprint, in slot order) at a full
  // place and in a packed buffer.
  const T::ModeLeaves& full_w = s.geom.within();
  const T::ModeLeaves packed_w = s.geom.packed(full_w);
  std::vector<bool> any(static_cast<size_t>(s.geom.tiles()), false);
  for (PyObject* g : grads) {
    PyObject* c = as_tensor(g)->carrier;
    T::Plan p;
    for (int64_t k = 0; k < s.geom.tiles(); ++k) {
      T::Source src{T::Place::Compact, as_tensor(g)->offset + s.geom.base(k), false};
      if (is_tiled(c)) {
        TiledState& gs = tiled_state(c);
        if (!gs.res.valid(k)) {
          PyErr_Format(PyExc_RuntimeError, "gradient accumulation: gradient tile %s is invalid: it holds no value",
                       T::tuple_text(s.geom.coordinate(k)).c_str());
          return nullptr;
        }
        src = T::source_of(gs.geom, gs.res, k);
        if (src.place == T::Place::Zeros) continue;
      }
      if (!tiled_ensure_slab(out.get())) return nullptr;
      T::Unit u;
      if (!any[static_cast<size_t>(k)])
        planner.move_tile(k, src, T::Place::Out, s.geom.base(k), false, &u);
      else
        planner.copy_tile(k, src.place, src.packed ? packed_w : full_w, src.base, T::Place::Out, full_w,
                          s.geom.base(k), true, &u);
      any[static_cast<size_t>(k)] = true;
      o.res.set(k, T::Location::Primary, true, nullptr, nullptr);  // in the slab from here (a private carrier)
      p.units.push_back(std::move(u));
    }
    if (p.units.empty()) continue;
    if (is_tiled(c)) {
      // The contribution's own places: read it as a request of its carrier,
      // writing into out's slab.
      TiledRequest* req = tiled_register(c, std::move(p));
      if (!req) return nullptr;
      req->out = Ref::borrow(o.slab.get());
      req->access.emplace_back(o.slab.get(), o.tokens[o.slab.get()]);
      const int rc = tiled_run_here(req);
      tiled_end(req, rc == 0);
      delete req;
      if (rc < 0) return nullptr;
    } else if (run_plan(out.get(), std::move(p), c, nullptr, o.slab.get()) < 0) {
      return nullptr;
    }
  }
  return tensor_new(out.get(), 0, as_tensor(t)->layout);
}

// ------------------------------------------------------------ the tile reader

struct TileReader {
  Ref te;
  TiledRequest* req = nullptr;
  bool host = false;  // an exact CPU primary: its tiles are read in place
  Ref stage, zeros;   // CPU
  // Each tile read from the secondary is one profiled transfer, however
  // many parts of it the bands read.
  std::unordered_set<int64_t> profiled;
};

namespace {

// move.submit / move.complete of one tile read from the secondary.
void record_read(PyObject* secondary, int64_t start, bool ok) {
  PyObject* session = profiler_current();
  if (!session) return;
  ErrorGuard keep;
  Ref impl = Ref::steal(SpanBatch::route(Py_TYPE(secondary), &CPU_Type));
  if (!impl) return;
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(secondary));
  const int64_t sid = profiler_new_id(session);
  profiler_record(session, sid, 0, "move.submit", cls, impl.get(), nullptr, start, 0, current_thread_id(), true);
  profiler_record(session, profiler_new_id(session), sid, "move.complete", cls, impl.get(), nullptr, start,
                  sw::now_ns() - start, current_thread_id(), ok);
}

}  // namespace

TileReader* tile_reader_open(PyObject* te, const char* purpose) {
  if (tiled_check_live(te) < 0) return nullptr;
  PolicyPlan pol;
  T::Plan p;
  if (plan_read_all(te, purpose, &p, &pol) < 0) return nullptr;
  TiledRequest* req = tiled_register(te, std::move(p));
  if (!req) return nullptr;
  req->evict = std::move(pol.evict);
  // The policy's promotions run now, on this thread; they commit at close.
  if (tiled_run_here(req) < 0) {
    tiled_end(req, false);
    delete req;
    return nullptr;
  }
  auto* r = new TileReader{Ref::borrow(te), req, tiled_primary_class(te) == &CPU_Type, {}, {}, {}};
  return r;
}

int tile_reader_read(TileReader* r, const std::vector<std::array<int64_t, 3>>& spans, std::vector<const char*>* out) {
  PyObject* te = r->te.get();
  TiledState& s = tiled_state(te);
  const int64_t T = s.geom.tile_size();
  const size_t item = sw::itemsize(s.dtype);
  out->assign(spans.size(), nullptr);
  int64_t need = 0;
  for (const auto& sp : spans)
    if (s.res.location(sp[0]) != T::Location::Implicit && !(r->host && s.res.location(sp[0]) == T::Location::Primary))
      need += sp[2];
  if (need && (!r->stage || carrier_size(r->stage.get()) < need)) {
    r->stage = Ref::steal(cpu_new(need, s.dtype, true, true));
    if (!r->stage) return -1;
  }
  SpanBatch b;
  const int u = b.unit();
  int64_t pos = 0;
  std::vector<int64_t> first_reads;  // secondary tiles read for the first time
  const int64_t start = sw::now_ns();
  for (size_t j = 0; j < spans.size(); ++j) {
    const auto [k, first, count] = spans[j];
    if (k < 0 || k >= s.geom.tiles() || first < 0 || count < 0 || first + count > T) {
      PyErr_Format(PyExc_ValueError, "tile span (%lld, %lld, %lld) is not inside a tile of %lld slots",
                   static_cast<long long>(k), static_cast<long long>(first), static_cast<long long>(count),
                   static_cast<long long>(T));
      return -1;
    }
    const T::Source src = T::source_of(s.geom, s.res, k);
    if (src.place == T::Place::Zeros) {
      if (!r->zeros) r->zeros = Ref::steal(cpu_new(T, s.dtype, true, false));
      if (!r->zeros) return -1;
      (*out)[j] = static_cast<const char*>(carrier_host_data(r->zeros.get())) + first * static_cast<int64_t>(item);
      continue;
    }
    PyObject* from = src.place == T::Place::Buffer ? static_cast<PyObject*>(s.res.buffer(k))
                                                    : (src.place == T::Place::Slab ? s.slab.get() : s.secondary.get());
    if (r->host && src.place != T::Place::Secondary) {
      (*out)[j] = static_cast<const char*>(carrier_host_data(from)) + (src.base + first) * static_cast<int64_t>(item);
      continue;
    }
    if (src.place == T::Place::Secondary && r->profiled.insert(k).second) first_reads.push_back(k);
    SpanCopy c;
    c.src = from;
    c.src_off = src.base + first;
    c.dst = r->stage.get();
    c.dst_off = pos;
    c.count = count;
    if (b.add(u, c) < 0) return -1;
    (*out)[j] = reinterpret_cast<const char*>(static_cast<intptr_t>(pos));  // resolved below
    pos += count;
  }
  if (pos) {
    if (tiled_grant_access(b, r->te.get(), nullptr) < 0) return -1;
    const int rc = span_batch_run_here(b);
    for (size_t n = 0; n < first_reads.size(); ++n) record_read(s.secondary.get(), start, rc == 0);
    if (rc < 0) return -1;
    const char* base = static_cast<const char*>(carrier_host_data(r->stage.get()));
    for (size_t j = 0; j < spans.size(); ++j) {
      const T::Source src = T::source_of(s.geom, s.res, spans[j][0]);
      if (src.place == T::Place::Zeros || (r->host && src.place != T::Place::Secondary)) continue;
      (*out)[j] = base + reinterpret_cast<intptr_t>((*out)[j]) * static_cast<int64_t>(item);
    }
  }
  return 0;
}

PyObject* tile_reader_as_primary(TileReader* r, PyObject* result) {
  const Py_ssize_t n = carrier_size(result);
  if (n < 0) return nullptr;
  Ref out = Ref::steal(carrier_allocate_like(tiled_state(r->te.get()).proto.get(), n, true, nullptr, true));
  if (!out) return nullptr;
  if (tiled_copy_here(r->req, result, out.get(), n) < 0 || carrier_release(result) < 0) return nullptr;
  return out.release();
}

int tile_reader_close(TileReader* r, bool ok) {
  const int rc = tiled_end(r->req, ok) < 0 && ok ? -1 : 0;
  delete r->req;
  {
    ErrorGuard keep;
    for (Ref* c : {&r->stage, &r->zeros})
      if (*c && carrier_release(c->get()) < 0) PyErr_Clear();
  }
  delete r;
  return rc;
}

}  // namespace ops

}  // namespace swpy

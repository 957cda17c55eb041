// The TiledEvictable family's request plumbing (see tiled_object.hpp): a
// plan from the engine (csrc/engine/tiled/requests) gets its carriers here
// (fresh tile buffers, a grown secondary, the zero tile), is registered in
// the residency state, runs as a span batch (move/spans.cpp: the move
// machinery's routes, workers, exit and fork policy) or on this thread, and
// commits at its end: the planned changes at once, the residency policy's
// evictions (deferred while other work reads the tile), then what freed
// storage is given back. Everything here runs with the GIL held.
#include <algorithm>
#include <string>

#include "tiled_object.hpp"
#include "move/move.hpp"
#include "await_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "autograd/ops_tiled.hpp"
#include "extension/extension_api.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace T = sw::tiled;


namespace {

constexpr size_t kPoolTiles = 2;
TiledObject* as_te(PyObject* o) { return reinterpret_cast<TiledObject*>(o); }
TiledState& S(PyObject* te) { return *as_te(te)->s; }
TiledValueTypes& V() { return module_state.tiled; }

std::string coord_text(const T::Geometry& g, int64_t k) { return T::tuple_text(g.coordinate(k)); }

}  // namespace

int tiled_claim(TiledState& s, PyObject* c) {
  const int64_t t = carrier_claim(c);
  if (!t) return -1;
  s.tokens[c] = t;
  return 0;
}

void tiled_drop(TiledState& s, PyObject* c) {
  if (!c) return;
  ErrorGuard keep;
  Ref owned = Ref::steal(c);  // dropped before keep restores the exception
  auto it = s.tokens.find(c);
  if (it != s.tokens.end()) {
    if (carrier_relinquish(c, it->second) < 0) PyErr_Clear();
    s.tokens.erase(it);
  }
  if (!carrier_is_owned(c) && carrier_release(c) < 0) PyErr_WriteUnraisable(c);
}

namespace {
int evict_now(PyObject* te, int64_t k);
}  // namespace

void tiled_after_request(PyObject* te) {
  TiledState& s = S(te);
  for (int64_t k : s.res.take_ready_deferred()) {
    if (s.released || s.res.location(k) != T::Location::Primary) continue;
    if (evict_now(te, k) < 0) PyErr_Clear();  // a failed copy leaves the tile primary and dirty
  }
  if (s.pending.empty() && !s.reading)
    for (PyObject* b : std::exchange(s.doomed, {})) tiled_drop(s, b);
  // (a slot read in progress may be reading the slab or a freed buffer:
  // they go once it is over)
  if (s.slab && !s.released && !s.reading && s.res.slab_tiles() == 0 && s.pending.empty()) {
    if (s.proto.get() == s.slab.get()) {
      // The constructor's primary was the slab: an empty carrier of its
      // class takes its place as the primary.
      Ref empty = Ref::steal(carrier_allocate_like(s.slab.get(), 0, true, nullptr, false));
      if (!empty || tiled_claim(s, empty.get()) < 0) {
        PyErr_Clear();
        return;
      }
      s.proto = std::move(empty);
    }
    tiled_drop(s, s.slab.release());
  }
}

namespace {

// ------------------------------------------------------------ requests

PyObject* place_carrier(TiledRequest* req, T::Place p, int64_t tile) {
  TiledState& s = S(req->te.get());
  switch (p) {
    case T::Place::Secondary: return s.secondary.get();
    case T::Place::Slab: return s.slab.get();
    case T::Place::Buffer: return static_cast<PyObject*>(s.res.buffer(tile));
    case T::Place::Fresh: return req->fresh_of(tile);
    case T::Place::Zeros: return s.zeros.get();
    case T::Place::Target: return req->target.get();
    case T::Place::Compact: return req->compact.get();
    case T::Place::Out: return req->out.get();
  }
  return nullptr;
}

bool fresh_zero(TiledRequest* req, int64_t tile) {
  bool zero = false;
  req->fresh_of(tile, &zero);
  return zero;
}

sw::Layout leaf_layout(const T::Leaves& l) {
  std::vector<sw::IntTree> e, st;
  for (const sw::LeafMode& m : l) {
    e.push_back(sw::IntTree::leaf(m.extent));
    st.push_back(sw::IntTree::leaf(m.stride));
  }
  if (e.empty()) return sw::Layout(sw::IntTree::node({sw::IntTree::leaf(1)}), sw::IntTree::node({sw::IntTree::leaf(0)}));
  return sw::Layout(sw::IntTree::node(std::move(e)), sw::IntTree::node(std::move(st)));
}

// Builds the batch of req's steps; one profiled transfer per unit that
// reads a tile.
std::shared_ptr<SpanBatch> batch_of(TiledRequest* req, PyObject* shapes) {
  auto b = std::make_shared<SpanBatch>();
  for (const T::Unit& unit : req->plan.units) {
    const int u = b->unit();
    int transfer = -1;
    for (const T::Step& st : unit) {
      if (st.zero && st.dst == T::Place::Fresh && fresh_zero(req, st.tile)) continue;
      SpanCopy c = tiled_copy_of(req, st);
      if (transfer < 0 && !st.zero) {
        Ref impl = st.logical ? Ref::borrow(reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type))
                              : Ref::steal(SpanBatch::route(Py_TYPE(c.src), Py_TYPE(c.dst)));
        if (!impl || (transfer = b->transfer(reinterpret_cast<PyObject*>(Py_TYPE(c.src)), impl.get(), shapes)) < 0)
          return nullptr;
      }
      c.transfer = st.zero ? -1 : transfer;
      if (b->add(u, c) < 0) return nullptr;
    }
  }
  if (tiled_grant_access(*b, req->te.get(), req) < 0) return nullptr;
  if (b->keep(req->te.get()) < 0 || (req->out && b->keep(req->out.get()) < 0)) return nullptr;
  return b;
}

// The batch's end: commit, then the handle's outcome.
void finish(TiledRequest* req, bool ok) {
  Ref handle = std::move(req->handle);
  PyObject* value = nullptr;
  if (ok)
    tiled_end(req, true, &value);
  else
    tiled_end(req, false);
  delete req;
  Ref result = Ref::steal(value);
  if (result)
    await_complete(handle.get(), result.get());
  else
    await_fail(handle.get());
}

}  // namespace

PyObject* tiled_start(TiledRequest* req, PyTypeObject* kind) {
  Ref handle = Ref::steal(await_new(kind));
  Ref shapes;
  if (handle) {
    std::vector<sw::IntTree> tile;
    for (int64_t e : S(req->te.get()).geom.tile()) tile.push_back(sw::IntTree::leaf(e));
    Ref shape = Ref::steal(shape_from_tree(sw::IntTree::node(std::move(tile))));
    shapes = shape ? Ref::steal(PyTuple_Pack(1, shape.get())) : Ref();
  }
  std::shared_ptr<SpanBatch> b = shapes ? batch_of(req, shapes.get()) : nullptr;
  if (!b) {
    tiled_end(req, false);
    delete req;
    return nullptr;
  }
  req->handle = Ref::borrow(handle.get());
  b->done = [req](bool ok) { finish(req, ok); };
  if (span_batch_start(b, kind == &AwaitProjection_Type ? handle.get() : nullptr) < 0) {
    b->done = nullptr;
    tiled_end(req, false);
    delete req;
    return nullptr;
  }
  return handle.release();
}

namespace {

int evict_now(PyObject* te, int64_t k) {
  TiledState& s = S(te);
  T::Plan p;
  if (T::Planner(s.geom, s.res).residency({k}, false, &p)) return 0;  // busy again: stays deferred
  TiledRequest* req = tiled_register(te, std::move(p));
  if (!req) return -1;
  const int rc = tiled_run_here(req);
  tiled_end(req, rc == 0);
  delete req;
  return rc;
}

}  // namespace

// ------------------------------------------------------------ the shared API

int tiled_check_live(PyObject* te) {
  if (!as_te(te)->s) {
    PyErr_SetString(PyExc_RuntimeError, "TiledEvictable is not initialised");
    return -1;
  }
  if (S(te).released || as_carrier(te)->released) {
    PyErr_SetString(PyExc_RuntimeError, "TiledEvictable carrier is released");
    return -1;
  }
  return 0;
}

int tiled_check_tensor(PyObject* te, PyObject* tensor, const char* what, T::Association* assoc) {
  if (!is_tensor(tensor)) {
    PyErr_Format(PyExc_TypeError, "%s must be a Tensor, not %.100s", what, type_name(tensor));
    return -1;
  }
  if (as_tensor(tensor)->carrier != te) {
    PyErr_Format(PyExc_TypeError, "%s must be backed by this TiledEvictable, not by %s", what,
                 type_name(as_tensor(tensor)->carrier));
    return -1;
  }
  if (tiled_check_live(te) < 0) return -1;
  TiledState& s = S(te);
  PyObject* lay = as_tensor(tensor)->layout;
  const Py_ssize_t off = as_tensor(tensor)->offset;
  if (s.last_layout.get() != lay || s.last_offset != off) {
    T::Association a;
    T::Incompatible why;
    if (engine_call([&] { why = s.geom.check(layout_of(lay), off, &a); }) < 0) return -1;
    if (why) {
      PyErr_SetString(PyExc_ValueError, s.geom.message(why).c_str());
      return -1;
    }
    s.last_layout = Ref::borrow(lay);
    s.last_offset = off;
    s.last_assoc = std::move(a);
  }
  if (assoc) *assoc = s.last_assoc;
  return 0;
}

PyObject* tiled_primary(PyObject* te) {
  TiledState& s = S(te);
  return s.slab ? s.slab.get() : s.proto.get();
}

int tiled_raise_refusal(PyObject* te, const T::Refusal& why, const char* what) {
  const std::string c = coord_text(S(te).geom, why.tile);
  if (why.rule == T::Refusal::Rule::Invalid)
    PyErr_Format(PyExc_RuntimeError, "tile %s of this TiledEvictable is invalid: %s", c.c_str(), what);
  else
    PyErr_Format(PyExc_RuntimeError,
                 "tile %s of this TiledEvictable is used by a pending tiled request%s; call wait() on that request "
                 "first",
                 c.c_str(), why.rule == T::Refusal::Rule::InResidencyRequest ? " (a residency request)" : "");
  return -1;
}

int tiled_consult(PyObject* te, const char* purpose, const std::vector<int64_t>& required, bool all,
                  PolicyPlan* out) {
  TiledState& s = S(te);
  if (!s.policy || (!all && required.empty())) return 0;
  std::vector<int64_t> every;
  if (all)
    for (int64_t k = 0; k < s.geom.tiles(); ++k) every.push_back(k);
  std::vector<int64_t> sorted = all ? every : required;
  std::sort(sorted.begin(), sorted.end());
  Ref req = Ref::steal(tiled_tile_set(s.geom, sorted));
  Ref r = req ? Ref::steal(PyObject_CallMethod(s.policy.get(), "plan", "Os", req.get(), purpose)) : Ref();
  if (!r) return -1;
  const int ok = PyObject_IsInstance(r.get(), V().residency_plan);
  if (ok <= 0) {
    if (!ok)
      PyErr_Format(PyExc_TypeError, "ResidencyPolicy.plan() must return a ResidencyPlan, not %.100s", type_name(r.get()));
    return -1;
  }
  std::vector<int64_t>* fields[3] = {&out->promote, &out->retain, &out->evict};
  const char* names[3] = {"promote", "retain", "evict"};
  for (int f = 0; f < 3; ++f) {
    Ref ts = Ref::steal(PyObject_GetAttrString(r.get(), names[f]));
    Ref coords = ts ? Ref::steal(PyObject_GetAttrString(ts.get(), "coordinates")) : Ref();
    if (!coords || tiled_ordinals_of(s.geom, coords.get(), "ResidencyPlan tile", fields[f]) < 0) return -1;
  }
  return 0;
}

TiledRequest* tiled_register(PyObject* te, T::Plan&& plan) {
  TiledState& s = S(te);
  auto* req = new TiledRequest{Ref::borrow(te), std::move(plan), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  const int64_t n = s.geom.slots();
  if (req->plan.grows_secondary && carrier_size(s.secondary.get()) != n) {
    const int grown = carrier_reserve(s.secondary.get(), n);
    if (grown <= 0) {
      PyErr_Clear();
      Ref fresh = Ref::steal(carrier_allocate_like(s.secondary.get(), n, true, nullptr, true));
      if (!fresh || tiled_claim(s, fresh.get()) < 0) {
        delete req;
        return nullptr;
      }
      s.retired.push_back(s.secondary.release());  // (the old, empty one: released with the carrier)
      s.secondary = std::move(fresh);
    }
  }
  bool any_zero_step = req->plan.uses_zeros;
  for (int64_t k : req->plan.fresh) {
    bool zero = false;
    PyObject* buf = tiled_take_buffer(te, &zero);
    if (!buf) {
      for (auto& f : req->fresh) tiled_recycle(te, f.second);
      delete req;
      return nullptr;
    }
    req->fresh_at[k] = req->fresh.size();
    req->fresh.emplace_back(k, buf);
    req->fresh_zero.push_back(zero);
  }
  if (any_zero_step && !s.zeros) {
    s.zeros = Ref::steal(carrier_allocate_like(s.proto.get(), s.geom.tile_size(), true, nullptr, false));
    if (!s.zeros || tiled_claim(s, s.zeros.get()) < 0) {
      s.zeros.reset();
      for (auto& f : req->fresh) tiled_recycle(te, f.second);
      delete req;
      return nullptr;
    }
  }
  s.res.register_request(req->plan.reg);
  s.pending.push_back(req);
  return req;
}

SpanCopy tiled_copy_of(TiledRequest* req, const T::Step& st) {
  SpanCopy c;
  c.src = st.zero ? nullptr : place_carrier(req, st.src, st.tile);
  c.dst = place_carrier(req, st.dst, st.tile);
  c.src_off = st.src_off;
  c.dst_off = st.dst_off;
  c.count = st.count;
  c.zero = st.zero;
  c.add = st.add;
  c.logical = st.logical;
  if (st.logical) {
    c.src_layout = leaf_layout(st.src_leaves);
    c.dst_layout = leaf_layout(st.dst_leaves);
  }
  return c;
}

// Owner access for the Python-level copies of b: to the carriers its
// copies touch that te holds claimed (not every tile buffer: a request's
// cost must not grow with the tiles elsewhere), and to req's claims.
int tiled_grant_access(SpanBatch& b, PyObject* te, TiledRequest* req) {
  TiledState& s = S(te);
  std::vector<PyObject*> touched;
  if (engine_call([&] { touched = b.carriers(); }) < 0) return -1;
  for (PyObject* c : touched) {
    auto it = s.tokens.find(c);
    if (it != s.tokens.end() && b.access(c, it->second) < 0) return -1;
  }
  if (!req) return 0;
  for (auto& [c, tok] : req->claims)
    if (b.access(c.get(), tok) < 0) return -1;
  for (auto& [c, tok] : req->access)
    if (b.access(c, tok) < 0) return -1;
  return 0;
}

int tiled_run_here(TiledRequest* req) {
  SpanBatch b;
  for (const T::Unit& unit : req->plan.units) {
    const int u = b.unit();
    for (const T::Step& st : unit) {
      if (st.zero && st.dst == T::Place::Fresh && fresh_zero(req, st.tile)) continue;
      if (b.add(u, tiled_copy_of(req, st)) < 0) return -1;
    }
  }
  if (tiled_grant_access(b, req->te.get(), req) < 0) return -1;
  return span_batch_run_here(b);
}

int tiled_end(TiledRequest* req, bool ok, PyObject** value) {
  PyObject* te = req->te.get();
  TiledState& s = S(te);
  int rc = 0;
  if (ok) {
    for (T::Request::Change& c : req->plan.reg.changes) {
      if (!c.fresh) continue;
      auto it = req->fresh_at.find(c.tile);
      if (it == req->fresh_at.end()) continue;
      c.buffer = std::exchange(req->fresh[it->second].second, nullptr);  // the state owns it from here
    }
    std::vector<T::Buffer> freed;
    s.res.commit(req->plan.reg, &freed);
    for (T::Buffer b : freed) tiled_recycle(te, static_cast<PyObject*>(b));
    if (value) {
      *value = req->result ? req->result() : Py_NewRef(Py_None);
      if (!*value) rc = -1;
    }
  }
  ErrorGuard keep;  // the request's failure outlives the cleanup
  s.res.unregister(req->plan.reg);
  s.pending.erase(std::find(s.pending.begin(), s.pending.end(), req));
  for (auto& f : req->fresh)
    if (f.second) tiled_recycle(te, f.second);
  req->fresh.clear();
  for (auto& [c, tok] : req->claims)
    if (carrier_relinquish(c.get(), tok) < 0) PyErr_Clear();
  req->claims.clear();
  if (ok && rc == 0) {
    for (int64_t k : req->evict) {
      if (s.released || s.res.location(k) != T::Location::Primary || s.res.writer(k)) continue;
      if (s.res.readers(k) || s.res.retained(k))
        s.res.defer(k);
      else if (evict_now(te, k) < 0)
        PyErr_Clear();  // a failed copy leaves the tile primary and dirty
    }
  }
  tiled_after_request(te);
  return rc;
}

PyObject* tiled_zero(sw::DTypeCode d) {
  if (d == sw::DTypeCode::Bool) Py_RETURN_FALSE;
  return d == sw::DTypeCode::Int32 ? PyLong_FromLong(0) : PyFloat_FromDouble(0.0);
}

int tiled_copy_here(TiledRequest* req, PyObject* src, PyObject* dst, Py_ssize_t n) {
  SpanBatch b;
  SpanCopy c;
  c.src = src;
  c.dst = dst;
  c.count = n;
  if (b.add(b.unit(), c) < 0) return -1;
  for (auto& [cr, tok] : req->claims)
    if (b.access(cr.get(), tok) < 0) return -1;
  return span_batch_run_here(b);
}

PyObject* tiled_fresh(PyObject* te, bool implicit) {
  TiledState& s = S(te);
  Ref p = Ref::steal(carrier_allocate_like(s.proto.get(), 0, true, nullptr, false));
  Ref q = p ? Ref::steal(carrier_allocate_like(s.secondary.get(), 0, true, nullptr, true)) : Ref();
  Ref grid = q ? Ref::steal(PyTuple_New(0)) : Ref();
  if (!grid) return nullptr;
  PyObject* out = carrier_alloc(&TiledEvictable_Type, as_carrier(te)->vt);
  if (!out) return nullptr;
  Ref o = Ref::steal(out);
  auto* n = new TiledState;
  as_te(out)->s = n;
  n->geom = s.geom;
  n->dtype = s.dtype;
  n->geometry_arg = Ref::borrow(s.geometry_arg.get());
  n->policy = Ref::borrow(s.policy.get());
  n->proto = Ref::borrow(p.get());
  n->primary_class = Ref::borrow(s.primary_class.get());
  n->secondary = Ref::borrow(q.get());
  n->res.reset(s.geom.tiles(), implicit ? T::Location::Implicit : T::Location::Invalid, false);
  if (tiled_claim(*n, p.get()) < 0 || tiled_claim(*n, q.get()) < 0) return nullptr;
  return o.release();
}

PyObject* tiled_ensure_slab(PyObject* te) {
  TiledState& s = S(te);
  if (s.slab) return s.slab.get();
  Ref slab = Ref::steal(carrier_allocate_like(s.proto.get(), s.geom.slots(), true, nullptr, false));
  if (!slab || tiled_claim(s, slab.get()) < 0) return nullptr;
  s.slab = std::move(slab);
  return s.slab.get();
}

PyObject* tiled_take_buffer(PyObject* te, bool* zero) {
  TiledState& s = S(te);
  *zero = false;
  if (!s.pool.empty()) {
    PyObject* b = s.pool.back();
    s.pool.pop_back();
    return b;
  }
  Ref b = Ref::steal(carrier_allocate_like(s.proto.get(), s.geom.tile_size(), true, nullptr, false));
  if (!b || tiled_claim(s, b.get()) < 0) return nullptr;
  *zero = true;
  return b.release();
}

void tiled_recycle(PyObject* te, PyObject* buffer) {
  TiledState& s = S(te);
  if (s.reading)
    s.doomed.push_back(buffer);
  else if (s.pool.size() < kPoolTiles && !s.released)
    s.pool.push_back(buffer);
  else
    tiled_drop(s, buffer);
}

}  // namespace swpy

// TiledEvictable: one logical tensor as a grid of tiles, each resident on
// its own on a primary (compute) tier or a secondary (backing) tier
// (API.md 13, tiled-carrier-composition).
//
// The rules are the engine's (csrc/engine/tiled/: geometry, residency,
// request planning); tiled/args.cpp checks the arguments, tiled/requests.cpp
// runs a plan's copies as a span batch and commits it; the direct
// operations and gradients are autograd/ops_tiled*.cpp. This file is the
// type: construction, the slot vtable, the properties and the request
// methods.
//
// Decisions where the contract is silent:
//   - A promoted tile gets a private buffer of the primary's class holding
//     its footprint packed (prod(tile_shape) slots); an evicted tile's buffer
//     is kept for the next promotion (two at most) or released. A full
//     primary given to the constructor (and a fresh result's) is the slab
//     until its last tile has left; `primary` is the slab while it lives,
//     else an empty carrier of the primary's class.
//   - Slot reads come from wherever the tile is (no residency change); a
//     slot write promotes the tile first (on this thread) and marks it dirty.
//   - project(..., destination=d) gathers into a kept staging carrier and
//     copies it into d at commit: a failed projection leaves d untouched.
//   - The compact result of a selection has the Layout canonical_layout()
//     has for the compact grid (an explicit Layout geometry: "dense").
#include <algorithm>
#include <string>

#include "tiled_object.hpp"
#include "await_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "autograd/internal.hpp"
#include "autograd/ops_tiled.hpp"
#include "extension/extension_api.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace T = sw::tiled;

namespace {

TiledObject* as_te(PyObject* o) { return reinterpret_cast<TiledObject*>(o); }
TiledState& S(PyObject* te) { return *as_te(te)->s; }
TiledValueTypes& V() { return module_state.tiled; }

#define TILED_INIT_OR_RAISE(self)                                            \
  if (!as_te(self)->s) {                                                    \
    PyErr_SetString(PyExc_RuntimeError, "TiledEvictable is not initialised"); \
    return nullptr;                                                         \
  }

int values_ready() {
  if (V().tile_set) return 0;
  PyErr_SetString(PyExc_RuntimeError,
                  "the tiled value types are not installed (`import strideweave` installs them)");
  return -1;
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* c) { return as_te(reinterpret_cast<PyObject*>(c))->s->dtype; }

Py_ssize_t vt_size(CarrierObject* c) {
  TiledState* s = as_te(reinterpret_cast<PyObject*>(c))->s;
  return s && !s->released ? s->geom.slots() : 0;
}

// Where slot i is now: the carrier and slot holding it (buffer: packed).
PyObject* slot_home(TiledState& s, Py_ssize_t i, Py_ssize_t* at, int64_t* tile) {
  const auto [k, pos] = s.geom.locate(i);
  *tile = k;
  *at = i;
  switch (s.res.location(k)) {
    case T::Location::Primary:
      if (PyObject* b = static_cast<PyObject*>(s.res.buffer(k))) {
        *at = pos;
        return b;
      }
      return s.slab.get();
    case T::Location::Secondary: return s.secondary.get();
    default: return nullptr;
  }
}

PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  PyObject* self = reinterpret_cast<PyObject*>(c);
  if (tiled_check_live(self) < 0) return nullptr;
  TiledState& s = S(self);
  Py_ssize_t at;
  int64_t k;
  Ref home = Ref::borrow(slot_home(s, i, &at, &k));
  if (!home) {
    if (s.res.location(k) == T::Location::Implicit) return tiled_zero(s.dtype);
    PyErr_Format(PyExc_RuntimeError, "tile %s of this TiledEvictable is invalid: it holds no value",
                 T::tuple_text(s.geom.coordinate(k)).c_str());
    return nullptr;
  }
  ++s.reading;  // a buffer freed (or the slab emptied) meanwhile stays until this read ends
  PyObject* v = carrier_get(home.get(), at);
  if (--s.reading == 0 && (!s.doomed.empty() || (s.slab && !s.res.slab_tiles()))) {
    ErrorGuard keep;
    tiled_after_request(self);
  }
  return v;
}

// The base checked mutability and bumps the version.
int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  PyObject* self = reinterpret_cast<PyObject*>(c);
  if (tiled_check_live(self) < 0) return -1;
  TiledState& s = S(self);
  const int64_t k = s.geom.locate(i).first;
  if (s.res.busy(k)) return tiled_raise_refusal(self, {T::Refusal::Rule::Busy, k}, "");
  if (!s.res.valid(k)) return tiled_raise_refusal(self, {T::Refusal::Rule::Invalid, k}, "scatter a value into it first");
  if (s.res.location(k) != T::Location::Primary) {
    T::Plan p;
    T::Planner(s.geom, s.res).residency({k}, true, &p);
    TiledRequest* req = tiled_register(self, std::move(p));
    if (!req) return -1;
    const int rc = tiled_run_here(req);
    tiled_end(req, rc == 0);
    delete req;
    if (rc < 0) return -1;
  }
  Py_ssize_t at;
  int64_t tile;
  PyObject* home = slot_home(s, i, &at, &tile);
  if (carrier_set_unchecked(home, at, v) < 0) return -1;
  s.res.set(k, T::Location::Primary, true, s.res.buffer(k), nullptr);
  return 0;
}

void release_all(TiledState& s) {
  s.released = true;
  for (T::Buffer b : s.res.buffers()) tiled_drop(s, static_cast<PyObject*>(b));
  s.res.reset(0, T::Location::Invalid, false);
  for (auto* v : {&s.pool, &s.doomed, &s.retired})
    for (PyObject* c : std::exchange(*v, {})) tiled_drop(s, c);
  for (Ref* r : {&s.zeros, &s.stage, &s.slab})
    if (*r) tiled_drop(s, r->release());
  // The tiers' objects stay (released): a gradient built after release is
  // still allocated like them, and `primary`/`secondary` name them.
  for (Ref* r : {&s.proto, &s.secondary})
    if (*r) tiled_drop(s, r->new_ref());
}

void vt_release(CarrierObject* c) {
  TiledState* s = as_te(reinterpret_cast<PyObject*>(c))->s;
  if (s && !s->released) release_all(*s);
}

// A fresh carrier of this geometry and tier classes (also of a released one:
// gradients of its tensors are built like it).
PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool, PyObject* dtype) {
  PyObject* self = reinterpret_cast<PyObject*>(c);
  TILED_INIT_OR_RAISE(self);
  TiledState& s = S(self);
  Ref seq = Ref::steal(carrier_values_snapshot(values, "new_like() values must be iterable"));
  if (!seq) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  if (n != s.geom.slots()) {
    PyErr_Format(PyExc_ValueError, "TiledEvictable.new_like() needs exactly %lld values, got %zd",
                 static_cast<long long>(s.geom.slots()), n);
    return nullptr;
  }
  if (dtype && dtype != Py_None && dtype_code(dtype) != s.dtype) {
    PyErr_SetString(PyExc_ValueError, "TiledEvictable.new_like() keeps the tiers' dtype");
    return nullptr;
  }
  Ref out = Ref::steal(tiled_fresh(self, true));
  if (!out) return nullptr;
  TiledState& o = S(out.get());
  Ref zero = Ref::steal(tiled_zero(s.dtype));
  PyObject** items = PySequence_Fast_ITEMS(seq.get());
  for (int64_t k = 0; k < s.geom.tiles(); ++k) {
    const int64_t base = s.geom.base(k);
    bool all_zero = true;
    for (int64_t p = 0; p < s.geom.tile_size() && all_zero; ++p) {
      const int eq = PyObject_RichCompareBool(items[base + s.geom.unpack(p)], zero.get(), Py_EQ);
      if (eq < 0) return nullptr;
      all_zero = eq == 1;
    }
    if (all_zero) continue;  // an all-zero tile stays implicit
    PyObject* slab = tiled_ensure_slab(out.get());
    if (!slab) return nullptr;
    for (int64_t p = 0; p < s.geom.tile_size(); ++p) {
      const int64_t i = base + s.geom.unpack(p);
      if (carrier_set_unchecked(slab, i, items[i]) < 0) return nullptr;
    }
    o.res.set(k, T::Location::Primary, true, nullptr, nullptr);
  }
  return out.release();
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool, PyObject*, bool) {
  PyObject* self = reinterpret_cast<PyObject*>(c);
  TILED_INIT_OR_RAISE(self);
  if (n != S(self).geom.slots()) {
    PyErr_Format(PyExc_ValueError, "TiledEvictable.allocate_like() allocates exactly %lld slots, not %zd",
                 static_cast<long long>(S(self).geom.slots()), n);
    return nullptr;
  }
  return tiled_fresh(self, true);
}

PyObject* vt_dlpack_info(CarrierObject*) {
  PyErr_SetString(PyExc_BufferError,
                  "DLPack is not supported for TiledEvictable carriers (tiles live on separate tiers); project() the "
                  "tiles you need into a CPU tensor and export that (a public move of a TiledEvictable tensor is "
                  "refused)");
  return nullptr;
}

const CarrierVTable tiled_vt = {vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
                                nullptr, nullptr, vt_dlpack_info};

// ------------------------------------------------------------------ construction

PyObject* TiledEvictable_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &tiled_vt);
  if (self) as_te(self)->s = nullptr;
  return self;
}

int TiledEvictable_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"primary", "secondary", "grid_shape", "tile_shape", "geometry", "residency_policy",
                             nullptr};
  PyObject *p, *s, *grid_obj, *tile_obj, *geometry = nullptr, *policy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|$OO:TiledEvictable", const_cast<char**>(kw), &p, &s, &grid_obj,
                                   &tile_obj, &geometry, &policy))
    return -1;
  if (as_te(self)->s) {
    PyErr_SetString(PyExc_RuntimeError, "TiledEvictable.__init__() cannot be called twice");
    return -1;
  }
  if (values_ready() < 0) return -1;
  const char* role[2] = {"primary", "secondary"};
  PyObject* tier[2] = {p, s};
  for (int r = 0; r < 2; ++r) {
    if (!is_carrier(tier[r])) {
      PyErr_Format(PyExc_TypeError, "TiledEvictable %s must be a Carrier instance, not %.100s", role[r],
                   type_name(tier[r]));
      return -1;
    }
    if (PyObject_TypeCheck(tier[r], &Evictable_Type) || is_tiled(tier[r])) {
      PyErr_Format(PyExc_TypeError, "TiledEvictable %s cannot be a dependent carrier (%s)", role[r], type_name(tier[r]));
      return -1;
    }
  }
  if (p == s) {
    PyErr_SetString(PyExc_ValueError, "TiledEvictable primary and secondary must be distinct carriers");
    return -1;
  }
  std::vector<int64_t> grid, tile;
  if (tiled_extents_arg(grid_obj, "grid_shape", &grid) < 0 || tiled_extents_arg(tile_obj, "tile_shape", &tile) < 0 ||
      tiled_policy_arg(policy) < 0)
    return -1;
  for (int r = 0; r < 2; ++r) {
    if (carrier_is_released(tier[r]) || carrier_is_owned(tier[r])) {
      PyErr_Format(PyExc_RuntimeError, "TiledEvictable %s %s carrier is %s", role[r], type_name(tier[r]),
                   carrier_is_released(tier[r]) ? "released" : "owned by another carrier or a pending move");
      return -1;
    }
  }
  Ref pd = Ref::steal(carrier_dtype(p));
  Ref sd = pd ? Ref::steal(carrier_dtype(s)) : Ref();
  if (!sd) return -1;
  if (pd.get() != sd.get() || !dtype_singleton(dtype_code(pd.get()))) {
    PyErr_Format(PyExc_TypeError, "TiledEvictable tiers must have one dtype: primary %R, secondary %R", pd.get(),
                 sd.get());
    return -1;
  }
  Ref gname = Ref::steal(geometry ? Py_NewRef(geometry) : PyUnicode_FromString("tiles"));
  T::Geometry geom;
  if (!gname || tiled_geometry_arg(gname.get(), grid, tile, &geom) < 0) return -1;
  const int64_t total = geom.slots();
  Py_ssize_t sizes[2];
  for (int r = 0; r < 2; ++r) {
    if ((sizes[r] = carrier_size(tier[r])) < 0) return -1;
    if (sizes[r] != 0 && sizes[r] != total) {
      PyErr_Format(PyExc_ValueError,
                   "TiledEvictable %s has %zd slots; it must be empty or have exactly prod(grid_shape) * "
                   "prod(tile_shape) = %lld",
                   role[r], sizes[r], static_cast<long long>(total));
      return -1;
    }
    const int m = carrier_is_mutable(tier[r]);
    if (m <= 0) {
      if (!m) PyErr_Format(PyExc_RuntimeError, "TiledEvictable %s %s carrier is not mutable", role[r], type_name(tier[r]));
      return -1;
    }
  }
  if (tiled_tier_routes(p, s) < 0) return -1;
  auto* st = new TiledState;
  st->geom = std::move(geom);
  st->dtype = dtype_code(pd.get());
  st->geometry_arg = std::move(gname);
  st->policy = Ref::borrow(policy == Py_None ? nullptr : policy);
  st->proto = Ref::borrow(p);
  st->primary_class = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(p)));
  if (sizes[0]) st->slab = Ref::borrow(p);
  st->secondary = Ref::borrow(s);
  st->res.reset(st->geom.tiles(),
                sizes[0] ? T::Location::Primary : (sizes[1] ? T::Location::Secondary : T::Location::Implicit),
                sizes[0] != 0);
  if (tiled_claim(*st, p) < 0 || tiled_claim(*st, s) < 0) {
    ErrorGuard keep;
    for (auto& [c, tok] : st->tokens) carrier_relinquish(c, tok);
    delete st;
    return -1;
  }
  as_te(self)->s = st;
  return 0;
}

int TiledEvictable_traverse(PyObject* self, visitproc visit, void* arg) {
  TiledState* s = as_te(self)->s;
  if (!s) return 0;
  for (Ref* r : {&s->proto, &s->slab, &s->secondary, &s->policy, &s->zeros, &s->stage, &s->geometry_arg,
                 &s->last_layout, &s->primary_class})
    Py_VISIT(r->get());
  for (auto* v : {&s->pool, &s->doomed, &s->retired})
    for (PyObject* c : *v) Py_VISIT(c);
  for (T::Buffer b : s->res.buffers()) Py_VISIT(static_cast<PyObject*>(b));
  return 0;
}

// Collected (or deallocated): the tiers and buffers die with their owner.
int TiledEvictable_clear(PyObject* self) {
  TiledState* s = as_te(self)->s;
  if (!s) return 0;
  ErrorGuard keep;
  if (!s->released) release_all(*s);
  as_carrier(self)->released = true;
  s->policy.reset();
  s->geometry_arg.reset();
  s->last_layout.reset();
  return 0;
}

void TiledEvictable_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  TiledEvictable_clear(self);
  delete as_te(self)->s;
  as_te(self)->s = nullptr;
  carrier_dealloc(self);
}

// ------------------------------------------------------------------ properties

int live_or_raise(PyObject* self) { return tiled_check_live(self); }

PyObject* extents_tuple(const std::vector<int64_t>& v) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(v.size()));
  for (size_t i = 0; t && i < v.size(); ++i) {
    PyObject* x = PyLong_FromLongLong(v[i]);
    if (!x) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), x);
  }
  return t;
}

PyObject* get_grid(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  return extents_tuple(S(self).geom.grid());
}
PyObject* get_tile(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  return extents_tuple(S(self).geom.tile());
}
PyObject* get_geometry(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  return S(self).geometry_arg.new_ref();
}
PyObject* get_primary(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  PyObject* p = tiled_primary(self);
  return Py_NewRef(p ? p : Py_None);
}
PyObject* get_secondary(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  return Py_NewRef(S(self).secondary ? S(self).secondary.get() : Py_None);
}
PyObject* get_policy(PyObject* self, void*) {
  TILED_INIT_OR_RAISE(self);
  return Py_NewRef(S(self).policy ? S(self).policy.get() : Py_None);
}

// The TileSet of the tiles whose (location, dirty) satisfy pred. Every
// tile (a fresh or fully valid carrier) is TileSet._every(grid), whose
// coordinates are built only when used: 2**22 tiles would otherwise be
// hundreds of MiB of tuples.
template <class Pred>
PyObject* tiles_where(PyObject* self, Pred pred) {
  if (live_or_raise(self) < 0) return nullptr;
  TiledState& s = S(self);
  std::vector<int64_t> ks;
  if (engine_call([&] { ks = s.res.where(pred); }) < 0) return nullptr;
  if (ks.empty() || static_cast<int64_t>(ks.size()) != s.geom.tiles()) return tiled_tile_set(s.geom, ks);
  Ref grid = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(s.geom.rank())));
  if (!grid) return nullptr;
  for (size_t i = 0; i < s.geom.rank(); ++i) {
    PyObject* x = PyLong_FromLongLong(s.geom.grid()[i]);
    if (!x) return nullptr;
    PyTuple_SET_ITEM(grid.get(), static_cast<Py_ssize_t>(i), x);
  }
  return PyObject_CallMethod(V().tile_set, "_every", "(O)", grid.get());
}
PyObject* get_primary_tiles(PyObject* self, void*) {
  return tiles_where(self, [](T::Location l, bool) { return l == T::Location::Primary; });
}
PyObject* get_secondary_tiles(PyObject* self, void*) {
  return tiles_where(self, [](T::Location l, bool) { return l == T::Location::Secondary; });
}
PyObject* get_valid_tiles(PyObject* self, void*) {
  return tiles_where(self, [](T::Location l, bool) { return l != T::Location::Invalid; });
}
PyObject* get_dirty_tiles(PyObject* self, void*) {
  return tiles_where(self, [](T::Location, bool dirty) { return dirty; });
}

PyObject* TiledEvictable_tile_state(PyObject* self, PyObject* t) {
  TILED_INIT_OR_RAISE(self);
  const T::Geometry& g = S(self).geom;
  Ref seq = Ref::steal(PySequence_Fast(t, ""));
  if (!seq) {
    PyErr_Format(PyExc_TypeError, "a tile coordinate must be a tuple of ints, not %.100s", type_name(t));
    return nullptr;
  }
  std::vector<int64_t> c;
  bool in = static_cast<size_t>(PySequence_Fast_GET_SIZE(seq.get())) == g.rank();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* x = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (PyBool_Check(x) || !PyIndex_Check(x)) {
      PyErr_Format(PyExc_TypeError, "a tile coordinate must be a tuple of ints, not %R", t);
      return nullptr;
    }
    c.push_back(PyLong_AsLongLong(x));
    if (c.back() == -1 && PyErr_Occurred()) return nullptr;
    in = in && c.back() >= 0 && c.back() < g.grid()[static_cast<size_t>(i) < g.rank() ? i : 0];
  }
  if (!in) {
    PyErr_Format(PyExc_ValueError, "tile coordinate %s is not in the tile grid %s", T::tuple_text(c).c_str(),
                 T::tuple_text(g.grid()).c_str());
    return nullptr;
  }
  if (live_or_raise(self) < 0) return nullptr;
  const int64_t k = g.ordinal(c);
  const T::Location loc = S(self).res.location(k);
  return PyObject_CallFunction(V().tile_state, "sOO", T::to_string(loc), loc != T::Location::Invalid ? Py_True : Py_False,
                               S(self).res.dirty(k) ? Py_True : Py_False);
}

PyObject* TiledEvictable_canonical_layout(PyObject* self, PyObject*) {
  TILED_INIT_OR_RAISE(self);
  return layout_from_engine(S(self).geom.layout());
}

PyObject* TiledEvictable_primary_bytes(PyObject* self, PyObject*) {
  TILED_INIT_OR_RAISE(self);
  TiledState& s = S(self);
  Py_ssize_t slots = 0;
  for (T::Buffer b : s.res.buffers()) slots += carrier_size(static_cast<PyObject*>(b));
  for (PyObject* b : s.pool) slots += carrier_size(b);
  if (s.slab && !carrier_is_released(s.slab.get())) slots += carrier_size(s.slab.get());
  const size_t item = sw::itemsize(s.dtype);
  return PyLong_FromSsize_t(slots * static_cast<Py_ssize_t>(item ? item : 1));
}

PyObject* TiledEvictable_request_counts(PyObject* self, PyObject*) {
  TILED_INIT_OR_RAISE(self);
  TiledState& s = S(self);
  return Py_BuildValue("{s:n,s:n,s:n}", "pending", static_cast<Py_ssize_t>(s.pending.size()), "retained",
                       static_cast<Py_ssize_t>(s.res.retained_tiles()), "deferred",
                       static_cast<Py_ssize_t>(s.res.deferred()));
}

PyObject* TiledEvictable_repr(PyObject* self) {
  if (!as_te(self)->s || S(self).released) return PyUnicode_FromString("<TiledEvictable released>");
  TiledState& s = S(self);
  std::string where;
  for (T::Location l : {T::Location::Implicit, T::Location::Invalid, T::Location::Primary, T::Location::Secondary})
    if (s.res.count(l))
      where += (where.empty() ? "" : ", ") + std::to_string(s.res.count(l)) + " " + T::to_string(l);
  Ref d = Ref::steal(carrier_dtype(self));
  if (!d) return nullptr;
  return PyUnicode_FromFormat("<TiledEvictable grid=%s tile=%s dtype=%R primary=%s secondary=%s tiles: %s>",
                              T::tuple_text(s.geom.grid()).c_str(), T::tuple_text(s.geom.tile()).c_str(), d.get(),
                              type_name(tiled_primary(self)), type_name(s.secondary.get()), where.c_str());
}

// ------------------------------------------------------------------ requests

PyObject* residency(PyObject* self, PyObject* tiles, bool promote) {
  TILED_INIT_OR_RAISE(self);
  std::vector<int64_t> ks;
  if (tiled_tiles_arg(self, tiles, &ks) < 0 || live_or_raise(self) < 0) return nullptr;
  TiledState& s = S(self);
  T::Plan p;
  if (T::Refusal why = T::Planner(s.geom, s.res).residency(ks, promote, &p))
    return tiled_raise_refusal(self, why, "it has no value to promote"), nullptr;
  TiledRequest* req = tiled_register(self, std::move(p));
  return req ? tiled_start(req, &AwaitResidency_Type) : nullptr;
}

PyObject* wait_on(PyObject* handle) {
  if (!handle) return nullptr;
  Ref h = Ref::steal(handle);
  Ref r = Ref::steal(PyObject_CallMethod(h.get(), "wait", nullptr));
  if (!r) return nullptr;
  Py_RETURN_NONE;
}

PyObject* TiledEvictable_promote_async(PyObject* self, PyObject* t) { return residency(self, t, true); }
PyObject* TiledEvictable_evict_async(PyObject* self, PyObject* t) { return residency(self, t, false); }
PyObject* TiledEvictable_promote(PyObject* self, PyObject* t) { return wait_on(residency(self, t, true)); }
PyObject* TiledEvictable_evict(PyObject* self, PyObject* t) { return wait_on(residency(self, t, false)); }

PyObject* TiledEvictable_flush(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"tiles", nullptr};
  PyObject* tiles = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:flush", const_cast<char**>(kw), &tiles)) return nullptr;
  TILED_INIT_OR_RAISE(self);
  std::vector<int64_t> ks;
  if ((tiles != Py_None && tiled_tiles_arg(self, tiles, &ks) < 0) || live_or_raise(self) < 0) return nullptr;
  TiledState& s = S(self);
  T::Plan p;
  if (T::Refusal why = T::Planner(s.geom, s.res).flush(ks, tiles == Py_None, &p))
    return tiled_raise_refusal(self, why, ""), nullptr;
  TiledRequest* req = tiled_register(self, std::move(p));
  return req ? tiled_start(req, &AwaitResidency_Type) : nullptr;
}

int claim_for(TiledRequest* req, PyObject* c) {
  const int64_t t = carrier_claim(c);
  if (!t) return -1;
  req->claims.emplace_back(Ref::borrow(c), t);
  return 0;
}

PyObject* TiledEvictable_project(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"tensor", "selection", "destination", nullptr};
  PyObject *tensor, *sel, *dest = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:project", const_cast<char**>(kw), &tensor, &sel, &dest))
    return nullptr;
  TILED_INIT_OR_RAISE(self);
  T::Association a;
  std::vector<int64_t> tiles, cgrid;
  if (tiled_check_tensor(self, tensor, "project() tensor", &a) < 0 ||
      tiled_selection_arg(self, sel, "project()", &tiles, &cgrid) < 0)
    return nullptr;
  TiledState& s = S(self);
  const Py_ssize_t need = static_cast<Py_ssize_t>(tiles.size()) * s.geom.tile_size();
  if (dest != Py_None && tiled_check_destination(self, dest, need) < 0) return nullptr;
  PolicyPlan pol;
  if (tiled_consult(self, "projection", tiles, false, &pol) < 0 || live_or_raise(self) < 0) return nullptr;
  const T::Geometry cg = s.geom.regrid(cgrid);
  Ref clayout = Ref::steal(layout_from_engine(cg.layout()));
  if (!clayout) return nullptr;
  const auto tv = T::compact_view(cg.layout(), 0, s.geom.tile(), cgrid);
  bool implicit = false;
  for (int64_t k : tiles) implicit = implicit || s.res.location(k) == T::Location::Implicit;
  // The target: a fresh result (zero-filled only when an implicit tile needs
  // zeros), or the kept staging carrier for a caller's destination.
  Ref target;
  bool zero = true;
  if (dest == Py_None) {
    target = Ref::steal(carrier_allocate_like(s.proto.get(), need, true, nullptr, !implicit));
    zero = implicit;
  } else if (s.stage && carrier_size(s.stage.get()) >= need) {
    target = std::move(s.stage);
    zero = false;
  } else {
    target = Ref::steal(carrier_allocate_like(s.proto.get(), need, true, nullptr, false));
  }
  if (!target) return nullptr;
  T::Plan p;
  if (T::Refusal why = T::Planner(s.geom, s.res).project(tiles, a, *tv, zero, &p))
    return tiled_raise_refusal(self, why, "it holds no value to project"), nullptr;
  T::Planner(s.geom, s.res).policy(pol.promote, pol.retain, &p);
  TiledRequest* req = tiled_register(self, std::move(p));
  if (!req) return nullptr;
  req->target = std::move(target);
  req->evict = std::move(pol.evict);
  PyObject* out = dest == Py_None ? req->target.get() : dest;
  if (claim_for(req, req->target.get()) < 0 || (dest != Py_None && claim_for(req, dest) < 0)) {
    tiled_end(req, false);
    delete req;
    return nullptr;
  }
  const bool grad = grad_enabled() && autograd::differentiable(tensor);
  PyObject* lay = clayout.get();
  for (PyObject* o : {out, lay, tensor}) req->keep.push_back(Ref::borrow(o));
  req->result = [req, self, out, lay, tensor, grad, tiles, cgrid, need]() -> PyObject* {
    if (out != req->target.get()) {
      if (tiled_copy_here(req, req->target.get(), out, need) < 0) return nullptr;
      TiledState& st = S(self);
      if (!st.stage && !st.released) st.stage = Ref::borrow(req->target.get());  // kept for the next one
    }
    Ref r = Ref::steal(tensor_new(out, 0, lay));
    if (r && grad) return tiled_gather_node(self, tensor, r.release(), tiles, cgrid);
    return r.release();
  };
  return tiled_start(req, &AwaitProjection_Type);
}

// scatter (a fresh result; reduction given) and assign (in place;
// reduction NULL) share their checks.
PyObject* write_tiles(PyObject* self, PyObject* compact, PyObject* full, PyObject* sel, const char* who,
                      PyObject* reduction) {
  TILED_INIT_OR_RAISE(self);
  TiledState& s = S(self);
  PyTypeObject* cls = tiled_primary_class(self);
  if (!is_tensor(compact) || !is_tensor(full)) {
    PyObject* bad = is_tensor(compact) ? full : compact;
    PyErr_Format(PyExc_TypeError, "%s %s must be a Tensor, not %.100s", who,
                 bad == compact ? "compact" : (reduction ? "template" : "tensor"), type_name(bad));
    return nullptr;
  }
  if (Py_TYPE(as_tensor(compact)->carrier) != cls) {
    PyErr_Format(PyExc_TypeError, "%s compact must be backed by a %s carrier (the primary tier's class), not %s", who,
                 type_name(cls), type_name(as_tensor(compact)->carrier));
    return nullptr;
  }
  T::Association a;
  std::vector<int64_t> tiles, cgrid;
  const std::string what = std::string(who) + (reduction ? " template" : " tensor");
  if (tiled_check_tensor(self, full, what.c_str(), &a) < 0 || tiled_selection_arg(self, sel, who, &tiles, &cgrid) < 0)
    return nullptr;
  bool add = false;
  if (reduction) {
    const bool str = PyUnicode_Check(reduction);
    add = str && PyUnicode_CompareWithASCIIString(reduction, "add") == 0;
    if (!add && !(str && PyUnicode_CompareWithASCIIString(reduction, "replace") == 0)) {
      PyErr_Format(PyExc_ValueError, "%s reduction must be 'replace' or 'add', not %R", who, reduction);
      return nullptr;
    }
  }
  T::CompactView cv;
  if (tiled_compact_arg(self, who, compact, cgrid, &cv) < 0) return nullptr;
  PolicyPlan pol;
  if (reduction && (tiled_consult(self, "scatter", tiles, false, &pol) < 0 || live_or_raise(self) < 0)) return nullptr;
  Ref result_te = reduction ? Ref::steal(tiled_fresh(self, false)) : Ref();
  PyObject* out_slab = result_te ? tiled_ensure_slab(result_te.get()) : nullptr;
  if (reduction && !out_slab) return nullptr;
  T::Plan p;
  const T::Planner planner(s.geom, s.res);
  const T::Refusal why = reduction ? planner.scatter(tiles, a, cv, add, &p) : planner.assign(tiles, a, cv, &p);
  if (why) return tiled_raise_refusal(self, why, "it holds no value to add to"), nullptr;
  planner.policy(pol.promote, pol.retain, &p);
  TiledRequest* req = tiled_register(self, std::move(p));
  if (!req) return nullptr;
  req->compact = Ref::borrow(as_tensor(compact)->carrier);
  req->evict = std::move(pol.evict);
  if (claim_for(req, req->compact.get()) < 0) {
    tiled_end(req, false);
    delete req;
    return nullptr;
  }
  if (reduction) {
    req->out = Ref::borrow(out_slab);
    req->access.emplace_back(out_slab, S(result_te.get()).tokens[out_slab]);
  }
  const bool grad = grad_enabled() && (autograd::differentiable(compact) || autograd::differentiable(full));
  PyObject* fresh = result_te.get();
  for (PyObject* o : {compact, full, fresh})
    if (o) req->keep.push_back(Ref::borrow(o));
  req->result = [self, fresh, tiles, cgrid, compact, full, grad, add]() -> PyObject* {
    PyObject* te = fresh ? fresh : self;
    for (int64_t k : tiles) S(te).res.set(k, T::Location::Primary, true, S(te).res.buffer(k), nullptr);
    as_carrier(te)->version += 1;  // one visible value version for the whole write
    if (!fresh) Py_RETURN_NONE;
    Ref r = Ref::steal(tensor_new(te, 0, as_tensor(full)->layout));
    if (r && grad) return tiled_scatter_node(self, compact, full, r.release(), tiles, cgrid, add);
    return r.release();
  };
  return tiled_start(req, reduction ? &AwaitMove_Type : &AwaitResidency_Type);
}

PyObject* TiledEvictable_scatter(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"compact", "template", "selection", "reduction", nullptr};
  PyObject *compact, *full, *sel, *red = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O:scatter", const_cast<char**>(kw), &compact, &full, &sel, &red))
    return nullptr;
  Ref r = red ? Ref::borrow(red) : Ref::steal(PyUnicode_FromString("replace"));
  return r ? write_tiles(self, compact, full, sel, "scatter()", r.get()) : nullptr;
}

PyObject* TiledEvictable_assign(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"tensor", "selection", "compact", nullptr};
  PyObject *full, *sel, *compact;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:assign", const_cast<char**>(kw), &full, &sel, &compact))
    return nullptr;
  return write_tiles(self, compact, full, sel, "assign()", nullptr);
}

PyObject* TiledEvictable_release(PyObject* self, PyObject*) {
  if (as_te(self)->s && !S(self).pending.empty()) {
    PyErr_Format(PyExc_RuntimeError,
                 "cannot release TiledEvictable: %zu tiled request(s) are still pending; wait() for them first",
                 S(self).pending.size());
    return nullptr;
  }
  if (carrier_release(self) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"tile_state", TiledEvictable_tile_state, METH_O, "tile_state(t): TileState(location, valid, dirty) of tile t."},
    {"canonical_layout", TiledEvictable_canonical_layout, METH_NOARGS,
     "The compatible Layout of the full logical tensor: Tensor(te, 0, te.canonical_layout())."},
    {"promote_async", TiledEvictable_promote_async, METH_O,
     "promote_async(tiles): start making every tile of tiles (a TileSet or TileSelection) valid on the primary."},
    {"evict_async", TiledEvictable_evict_async, METH_O,
     "evict_async(tiles): start moving every tile to the secondary (dirty values written back first)."},
    {"promote", TiledEvictable_promote, METH_O, "promote_async(tiles).wait()"},
    {"evict", TiledEvictable_evict, METH_O, "evict_async(tiles).wait()"},
    {"flush", method_cast(TiledEvictable_flush), METH_VARARGS | METH_KEYWORDS,
     "flush(tiles=None) -> AwaitResidency: write the dirty primary tiles of tiles (all when None) to the secondary; "
     "they stay primary-resident and become clean."},
    {"project", method_cast(TiledEvictable_project), METH_VARARGS | METH_KEYWORDS,
     "project(tensor, selection, destination=None) -> AwaitProjection: gather the selected tiles of the full tensor "
     "into one compact Tensor of the primary's class."},
    {"scatter", method_cast(TiledEvictable_scatter), METH_VARARGS | METH_KEYWORDS,
     "scatter(compact, template, selection, reduction='replace') -> AwaitMove: a fresh full TiledEvictable with the "
     "compact tiles written at the selection (added to the template's for 'add')."},
    {"assign", method_cast(TiledEvictable_assign), METH_VARARGS | METH_KEYWORDS,
     "assign(tensor, selection, compact) -> AwaitResidency: write the compact tiles into the selected tiles of this "
     "carrier (they become primary-resident, valid and dirty; one version step)."},
    {"release", TiledEvictable_release, METH_NOARGS,
     "Release every tile's storage and both tiers (RuntimeError while requests are pending). Idempotent."},
    {"_primary_bytes", TiledEvictable_primary_bytes, METH_NOARGS,
     "Bytes of primary storage held: resident tiles' buffers, kept buffers and the slab."},
    {"_request_counts", TiledEvictable_request_counts, METH_NOARGS,
     "Private (diagnostics): pending requests, and tiles retained and deferred by residency policies."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef getset[] = {
    {"grid_shape", get_grid, nullptr, "The tile grid (a tuple).", nullptr},
    {"tile_shape", get_tile, nullptr, "The extents of one tile (a tuple).", nullptr},
    {"geometry", get_geometry, nullptr, "'tiles', 'dense', 'row-major' or the Layout given.", nullptr},
    {"primary", get_primary, nullptr, "The primary tier: the slab while tiles live in it, else an empty carrier of "
     "its class.", nullptr},
    {"secondary", get_secondary, nullptr, "The secondary tier.", nullptr},
    {"residency_policy", get_policy, nullptr, "The ResidencyPolicy given, or None.", nullptr},
    {"primary_tiles", get_primary_tiles, nullptr, "TileSet of the primary-resident tiles.", nullptr},
    {"secondary_tiles", get_secondary_tiles, nullptr, "TileSet of the secondary-resident tiles.", nullptr},
    {"valid_tiles", get_valid_tiles, nullptr, "TileSet of the tiles holding a value.", nullptr},
    {"dirty_tiles", get_dirty_tiles, nullptr, "TileSet of the primary tiles the secondary does not hold yet.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* install_values(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"TileSet", "TileSelection", "ResidencyPlan", "TileState", "ResidencyPolicy", "options",
                             nullptr};
  PyObject* t[6];
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOO:_install_tiled_values", const_cast<char**>(kw), &t[0], &t[1],
                                   &t[2], &t[3], &t[4], &t[5]))
    return nullptr;
  TiledValueTypes& v = V();
  PyObject** slots[] = {&v.tile_set, &v.tile_selection, &v.residency_plan, &v.tile_state, &v.residency_policy,
                        &v.options};
  for (int i = 0; i < 6; ++i) Py_XSETREF(*slots[i], Py_NewRef(t[i]));
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"_install_tiled_values", method_cast(install_values), METH_VARARGS | METH_KEYWORDS,
     "Private: the TiledEvictable module of the Python package hands its value types to _core (at import)."},

    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject TiledEvictable_Type = static_type("strideweave.TiledEvictable", sizeof(TiledObject));

int tiled_evictable_module_init(PyObject* module) {
  TiledEvictable_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  TiledEvictable_Type.tp_doc =
      "TiledEvictable(primary, secondary, grid_shape, tile_shape, *, geometry='tiles', residency_policy=None)\n\n"
      "A carrier of prod(grid_shape) * prod(tile_shape) slots split into tiles that are independently resident on "
      "primary (the compute tier) or secondary (the backing tier). Both tiers are live, unowned, publicly mutable "
      "carriers of one dtype, each empty or exactly the full slot count; the TiledEvictable claims both until "
      "released. geometry: 'tiles' (each tile contiguous, tile-major), 'dense' (the logical tensor "
      "first-mode-fastest), 'row-major' (C order, as NumPy, .npy and safetensors store it) or a compact injective "
      "Layout of the full logical shape.";
  TiledEvictable_Type.tp_base = &Carrier_Type;
  TiledEvictable_Type.tp_new = TiledEvictable_new;
  TiledEvictable_Type.tp_init = TiledEvictable_init;
  TiledEvictable_Type.tp_dealloc = TiledEvictable_dealloc;
  TiledEvictable_Type.tp_traverse = TiledEvictable_traverse;
  TiledEvictable_Type.tp_clear = TiledEvictable_clear;
  TiledEvictable_Type.tp_repr = TiledEvictable_repr;
  TiledEvictable_Type.tp_methods = methods;
  TiledEvictable_Type.tp_getset = getset;
  if (add_type(module, &TiledEvictable_Type, "TiledEvictable") < 0) return -1;
  if (extension_define_native(&TiledEvictable_Type) < 0 || tiled_nodes_init(module) < 0) return -1;
  return PyModule_AddFunctions(module, module_methods);
}

}  // namespace swpy

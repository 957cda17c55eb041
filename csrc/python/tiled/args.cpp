// Argument checks of the TiledEvictable methods (see tiled_object.hpp):
// constructor arguments (extents, policy, geometry, whether the tiers can
// serve), tile sets and selections bound to the grid, the compact input of
// scatter / assign and project()'s destination. Each returns 0 or raises
// the documented error (TypeError / ValueError / RuntimeError) and -1.
#include <numeric>
#include <optional>
#include <string>

#include "tiled_object.hpp"
#include "move/move.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "autograd/internal.hpp"
#include "module_state.hpp"
#include "util/compat.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace T = sw::tiled;

namespace {

TiledState& S(PyObject* te) { return *reinterpret_cast<TiledObject*>(te)->s; }
TiledValueTypes& V() { return module_state.tiled; }

}  // namespace

// Ordinals of coordinates (a tuple of int tuples) bound to the grid, with
// the messages of `what` (TileSet, ResidencyPlan tile). 0 / -1.
int tiled_ordinals_of(const T::Geometry& g, PyObject* coords, const char* what, std::vector<int64_t>* out) {
  Ref seq = Ref::steal(PySequence_Fast(coords, "coordinates must be a sequence"));
  if (!seq) return -1;
  const size_t r = g.rank();
  for (Py_ssize_t n = 0; n < PySequence_Fast_GET_SIZE(seq.get()); ++n) {
    Ref c = Ref::steal(PySequence_Tuple(PySequence_Fast_GET_ITEM(seq.get(), n)));
    if (!c) return -1;
    if (static_cast<size_t>(PyTuple_GET_SIZE(c.get())) != r) {
      PyErr_Format(PyExc_ValueError, "%s has rank %zd but the tile grid %s has rank %zu", what,
                   PyTuple_GET_SIZE(c.get()), T::tuple_text(g.grid()).c_str(), r);
      return -1;
    }
    std::vector<int64_t> t(r);
    for (size_t i = 0; i < r; ++i) {
      t[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(c.get(), static_cast<Py_ssize_t>(i)));
      if (t[i] == -1 && PyErr_Occurred()) return -1;
      if (t[i] < 0 || t[i] >= g.grid()[i]) {
        PyErr_Format(PyExc_ValueError, "%s coordinate %R is out of range on axis %zu of the tile grid %s", what,
                     c.get(), i, T::tuple_text(g.grid()).c_str());
        return -1;
      }
    }
    out->push_back(g.ordinal(t));
  }
  return 0;
}

int tiled_tiles_arg(PyObject* te, PyObject* tiles, std::vector<int64_t>* out) {
  const int sel = PyObject_IsInstance(tiles, V().tile_selection);
  const int set = sel ? 0 : PyObject_IsInstance(tiles, V().tile_set);
  if (sel < 0 || set < 0) return -1;
  if (!sel && !set) {
    PyErr_Format(PyExc_TypeError, "tiles must be a TileSet or a TileSelection, not %.100s", type_name(tiles));
    return -1;
  }
  if (set) {
    // Every tile of this grid (TileSet._every, as valid_tiles gives it):
    // the ordinals in order, without building its coordinates.
    Ref grid = Ref::steal(PyObject_GetAttrString(tiles, "_grid"));
    if (!grid) return -1;
    const std::vector<int64_t>& g = S(te).geom.grid();
    bool same = PyTuple_Check(grid.get()) && static_cast<size_t>(PyTuple_GET_SIZE(grid.get())) == g.size();
    for (size_t i = 0; same && i < g.size(); ++i) {
      const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(grid.get(), static_cast<Py_ssize_t>(i)));
      if (v == -1 && PyErr_Occurred()) return -1;
      same = v == g[i];
    }
    if (same) {
      out->resize(static_cast<size_t>(S(te).geom.tiles()));
      std::iota(out->begin(), out->end(), int64_t{0});
      return 0;
    }
  }
  Ref coords = Ref::steal(PyObject_GetAttrString(tiles, "coordinates"));
  if (!coords) return -1;
  if (sel && PyObject_Length(coords.get()) > 0) {
    Ref per = Ref::steal(PyObject_GetAttrString(tiles, "per_axis"));
    if (!per || PyObject_Length(per.get()) != static_cast<Py_ssize_t>(S(te).geom.rank())) {
      if (per)
        PyErr_Format(PyExc_ValueError, "TileSelection has rank %zd but the tile grid %s has rank %zu",
                     PyObject_Length(per.get()), T::tuple_text(S(te).geom.grid()).c_str(), S(te).geom.rank());
      return -1;
    }
  }
  if (tiled_ordinals_of(S(te).geom, coords.get(), sel ? "TileSelection" : "TileSet", out) < 0) return -1;
  if (sel) std::sort(out->begin(), out->end());
  return 0;
}

int tiled_selection_arg(PyObject* te, PyObject* sel, const char* who, std::vector<int64_t>* tiles,
                  std::vector<int64_t>* cgrid) {
  const int ok = PyObject_IsInstance(sel, V().tile_selection);
  if (ok <= 0) {
    if (!ok) PyErr_Format(PyExc_TypeError, "%s selection must be a TileSelection, not %.100s", who, type_name(sel));
    return -1;
  }
  const T::Geometry& g = S(te).geom;
  Ref per = Ref::steal(PyObject_GetAttrString(sel, "per_axis"));
  Ref seq = per ? Ref::steal(PySequence_Fast(per.get(), "per_axis")) : Ref();
  if (!seq) return -1;
  if (static_cast<size_t>(PySequence_Fast_GET_SIZE(seq.get())) != g.rank()) {
    PyErr_Format(PyExc_ValueError, "TileSelection has rank %zd but the tile grid %s has rank %zu",
                 PySequence_Fast_GET_SIZE(seq.get()), T::tuple_text(g.grid()).c_str(), g.rank());
    return -1;
  }
  for (size_t i = 0; i < g.rank(); ++i) {
    PyObject* axis = PySequence_Fast_GET_ITEM(seq.get(), static_cast<Py_ssize_t>(i));
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(axis); ++j) {
      const long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(axis, j));
      if (x == -1 && PyErr_Occurred()) return -1;
      if (x >= g.grid()[i]) {
        PyErr_Format(PyExc_ValueError, "TileSelection axis %zu coordinate %lld is out of range for the tile grid %s",
                     i, x, T::tuple_text(g.grid()).c_str());
        return -1;
      }
    }
    cgrid->push_back(PyTuple_GET_SIZE(axis));
  }
  Ref coords = Ref::steal(PyObject_GetAttrString(sel, "coordinates"));
  return coords ? tiled_ordinals_of(g, coords.get(), "TileSelection", tiles) : -1;
}

PyObject* tiled_tile_set(const T::Geometry& g, const std::vector<int64_t>& ks) {
  Ref coords = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(ks.size())));
  if (!coords) return nullptr;
  for (size_t n = 0; n < ks.size(); ++n) {
    const std::vector<int64_t> t = g.coordinate(ks[n]);
    PyObject* c = PyTuple_New(static_cast<Py_ssize_t>(t.size()));
    if (!c) return nullptr;
    PyTuple_SET_ITEM(coords.get(), static_cast<Py_ssize_t>(n), c);
    for (size_t i = 0; i < t.size(); ++i) {
      PyObject* x = PyLong_FromLongLong(t[i]);
      if (!x) return nullptr;
      PyTuple_SET_ITEM(c, static_cast<Py_ssize_t>(i), x);
    }
  }
  return PyObject_CallMethod(V().tile_set, "_trusted", "(On)", coords.get(), static_cast<Py_ssize_t>(g.rank()));
}

// An extent tuple argument (grid_shape, tile_shape). 0 / -1.
int tiled_extents_arg(PyObject* v, const char* name, std::vector<int64_t>* out) {
  Ref seq = Ref::steal(PySequence_Fast(v, ""));
  if (!seq) {
    PyErr_Format(PyExc_TypeError, "TiledEvictable %s must be a sequence of ints, not %.100s", name, type_name(v));
    return -1;
  }
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* x = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (PyBool_Check(x) || !PyIndex_Check(x)) {
      PyErr_Format(PyExc_TypeError, "TiledEvictable %s entries must be ints, not %.100s", name, type_name(x));
      return -1;
    }
    const long long e = PyLong_AsLongLong(x);
    if (e == -1 && PyErr_Occurred()) return -1;
    out->push_back(e);
  }
  return 0;
}

int tiled_policy_arg(PyObject* p) {
  if (p == Py_None) return 0;
  const int ok = PyType_Check(p) ? 0 : PyObject_IsInstance(p, V().residency_policy);
  if (ok < 0) return -1;
  Ref plan = ok ? Ref::steal(PyObject_GetAttrString(p, "plan")) : Ref();
  if (ok && !plan) PyErr_Clear();
  if (plan && PyCallable_Check(plan.get())) return 0;
  if (PyType_Check(p))
    PyErr_Format(PyExc_TypeError,
                 "TiledEvictable residency_policy must implement ResidencyPolicy (plan(required, purpose)), not the "
                 "class %s (pass an instance)",
                 class_name(p));
  else
    PyErr_Format(PyExc_TypeError,
                 "TiledEvictable residency_policy must implement ResidencyPolicy (plan(required, purpose)), not %.100s",
                 type_name(p));
  return -1;
}

// A tier can serve only when tiles move both ways between the tiers' classes
// and between primaries (as move resolves them).
int tiled_tier_routes(PyObject* p, PyObject* s) {
  struct Need {
    PyObject *a, *b;
    const char* why;
  };
  const Need needs[] = {{p, s, "evicting and flushing tiles"},
                        {s, p, "reading tiles back"},
                        {p, p, "projections and tile buffers"}};
  for (const Need& n : needs) {
    Ref op = Ref::steal(SpanBatch::route(Py_TYPE(n.a), Py_TYPE(n.b)));
    if (op) continue;
    Ref why = Ref::steal(compat::take_raised());
    PyErr_Format(PyExc_TypeError,
                 "TiledEvictable tiers %s (primary) and %s (secondary) cannot serve: %s needs a transfer route from %s "
                 "to %s (%S)",
                 type_name(p), type_name(s), n.why, type_name(n.a), type_name(n.b), why ? why.get() : Py_None);
    return -1;
  }
  if (!carrier_overrides(p, "allocate_like") && !(as_carrier(p)->vt && as_carrier(p)->vt->allocate_like)) {
    PyErr_Format(PyExc_TypeError,
                 "TiledEvictable primary %s carrier cannot serve as a tier: it has no allocate_like() (tile buffers "
                 "and results are allocated like it)",
                 type_name(p));
    return -1;
  }
  return 0;
}

int tiled_geometry_arg(PyObject* g, const std::vector<int64_t>& grid, const std::vector<int64_t>& tile, T::Geometry* out) {
  T::GeometryKind kind;
  const sw::Layout* lay = nullptr;
  if (is_layout(g)) {
    kind = T::GeometryKind::Explicit;
    lay = &layout_of(g);
  } else if (PyUnicode_Check(g)) {
    const char* n = PyUnicode_AsUTF8(g);
    if (!n) return -1;
    const std::string name = n;
    if (name == "tiles") kind = T::GeometryKind::Tiles;
    else if (name == "dense") kind = T::GeometryKind::Dense;
    else if (name == "row-major") kind = T::GeometryKind::RowMajor;
    else {
      PyErr_Format(PyExc_ValueError, "TiledEvictable geometry must be 'tiles', 'dense', 'row-major' or a Layout, not %R",
                   g);
      return -1;
    }
  } else {
    PyErr_Format(PyExc_TypeError, "TiledEvictable geometry must be 'tiles', 'dense', 'row-major' or a Layout, not %.100s",
                 type_name(g));
    return -1;
  }
  std::string why;
  const int r = engine_check(&why, [&] { *out = T::Geometry(kind, grid, tile, lay); });
  if (r > 0) PyErr_Format(PyExc_ValueError, "TiledEvictable: %s", why.c_str());
  return r == 0 ? 0 : -1;
}

// The compact argument of scatter / assign: a live Tensor of the primary's
// exact class and dtype, shaped like the selection, its carrier claimed by
// req. Its view over the compact grid in *cv. 0 / -1.
int tiled_compact_arg(PyObject* self, const char* who, PyObject* compact, const std::vector<int64_t>& cgrid,
                T::CompactView* cv) {
  TiledState& s = S(self);
  PyObject* c = as_tensor(compact)->carrier;
  if (carrier_is_released(c)) {
    PyErr_Format(PyExc_RuntimeError, "%s compact %s carrier is released", who, type_name(c));
    return -1;
  }
  if (dtype_code(as_tensor(compact)->dtype) != s.dtype) {
    Ref d = Ref::steal(carrier_dtype(self));
    PyErr_Format(PyExc_TypeError, "%s compact dtype %R must match the TiledEvictable dtype %R", who,
                 as_tensor(compact)->dtype, d.get());
    return -1;
  }
  const T::Geometry cg = s.geom.regrid(cgrid);
  const sw::Layout& l = layout_of(as_tensor(compact)->layout);
  std::optional<T::CompactView> v;
  if (l.shape() == cg.layout().shape()) v = T::compact_view(l, as_tensor(compact)->offset, s.geom.tile(), cgrid);
  if (!v) {
    Ref want = Ref::steal(shape_from_tree(cg.layout().shape()));
    PyErr_Format(PyExc_ValueError, "%s compact shape %R must be the selected region's shape %R", who,
                 autograd::shape_obj(compact), want.get());
    return -1;
  }
  if (carrier_is_owned(c)) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s compact %s carrier is owned by another carrier or a pending move; wait() for that work first",
                 who, type_name(c));
    return -1;
  }
  *cv = std::move(*v);
  return 0;
}

// project()'s destination: a live, mutable carrier of the primary's exact
// class and dtype with room for need slots (an empty one that can grow). 0 / -1.
int tiled_check_destination(PyObject* self, PyObject* d, Py_ssize_t need) {
  PyTypeObject* cls = tiled_primary_class(self);
  if (!is_carrier(d)) {
    PyErr_Format(PyExc_TypeError, "destination must be a Carrier instance, not %.100s", type_name(d));
    return -1;
  }
  if (PyObject_TypeCheck(d, &Evictable_Type) || is_tiled(d)) {
    PyErr_Format(PyExc_TypeError, "destination cannot be a dependent carrier (%s)", type_name(d));
    return -1;
  }
  if (Py_TYPE(d) != cls) {
    PyErr_Format(PyExc_TypeError, "destination must be a %s carrier (the primary tier's class), not %s", type_name(cls),
                 type_name(d));
    return -1;
  }
  const int m = carrier_is_released(d) ? 0 : carrier_is_mutable(d);
  if (m <= 0) {
    if (!m)
      PyErr_Format(PyExc_RuntimeError, "destination %s carrier is %s", type_name(d),
                   carrier_is_released(d) ? "released" : "not mutable");
    return -1;
  }
  Ref dd = Ref::steal(carrier_dtype(d));
  if (!dd) return -1;
  if (dtype_code(dd.get()) != S(self).dtype) {
    Ref mine = Ref::steal(carrier_dtype(self));
    PyErr_Format(PyExc_TypeError, "destination dtype %R must match the TiledEvictable dtype %R", dd.get(), mine.get());
    return -1;
  }
  const Py_ssize_t n = carrier_size(d);
  if (n < 0) return -1;
  if (n < need) {
    const int grown = n == 0 ? carrier_reserve(d, need) : 0;
    if (grown < 0) return -1;
    if (!grown) {
      PyErr_Format(PyExc_ValueError, "destination %s carrier is too small: %zd slots for %zd selected slots",
                   type_name(d), n, need);
      return -1;
    }
  }
  return 0;
}

}  // namespace swpy

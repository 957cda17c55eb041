// Full TiledEvictable tensors as direct operands of add, mul, relu and
// reduce_sum (see ops_support.hpp). The carrier is written in Python
// (strideweave/carriers/tiled_evictable.py); these functions only call its
// hooks: _check_operand(tensor) (tile-footprint rule), _operand(tensor,
// purpose) (blocking dense copy of every tile, no node; RuntimeError when a
// tile is under another caller's pending residency request) and
// _gradient(tensor, dense_grad) (a fresh TiledEvictable gradient).
//
// Forward on a CPU primary runs tile by tile instead (tiled_forward, called
// by Operation.forward): the carrier's _tile_reader(purpose) hands out one
// tile's values at a time (in place when primary-resident, else in a staging
// buffer), the engine kernels compute that tile's part of the result
// (sw::split_tiles gives every operand's within-tile leaves and per-tile
// offsets), so the forward holds about one tile of values per tiled operand
// beyond its result. Elementwise results interleave the tiles, so tiles are
// computed in bands (see Bands), the reads of a band batched per chunk of
// tiles whose spans total about one tile. Anything that path does not take (another primary class, a
// layout that does not split at the tiles, a bad argument) goes through the
// node's _forward and the dense _operand hook as before.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "autograd/ops_support.hpp"
#include "autograd/ops_tiled.hpp"
#include "tile_split.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"

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

// Calls the carrier's hook; its exception gets "op(): " before the message.
PyObject* call_hook(const char* op, const char* what, PyObject* carrier, const char* hook, PyObject* a,
                    PyObject* b = nullptr, PyObject* c = nullptr) {
  Ref name = Ref::steal(PyUnicode_FromString(hook));
  if (!name) return nullptr;
  Ref r = Ref::steal(PyObject_CallMethodObjArgs(carrier, name.get(), a, b, c, nullptr));
  if (!r) {
    if (!PyErr_ExceptionMatches(PyExc_MemoryError)) autograd::add_error_context(op, what);
    return nullptr;
  }
  return r.release();
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

PyObject* input_gradient(PyObject* x, PyObject* grad, const char* op) {
  Ref g = Ref::steal(grad);
  if (!g) return nullptr;
  PyObject* c = as_tensor(x)->carrier;
  if (!is_tiled_carrier(c)) return g.release();
  Ref zeros = Ref::steal(zero_tiles(c, g.get()));
  if (!zeros) return nullptr;
  return call_hook(op, " backward: ", c, "_gradient", x, g.get(), zeros.get());
}

}  // namespace swpy::ops

// ------------------------------------------------------------ tile-by-tile forward

namespace swpy::ops {

namespace {

enum class Kind { Add, Mul, MulScalar, Relu, Sum };

// An int tuple attribute of a TiledEvictable (grid_shape, tile_shape).
int extents_of(PyObject* te, const char* attr, std::vector<int64_t>* out) {
  Ref v = Ref::steal(PyObject_GetAttrString(te, attr));
  if (!v) return -1;
  Ref items = Ref::steal(PySequence_Tuple(v.get()));
  if (!items) return -1;
  out->clear();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i) {
    const long long e = PyLong_AsLongLong(PyTuple_GET_ITEM(items.get(), i));
    if (e == -1 && PyErr_Occurred()) return -1;
    out->push_back(e);
  }
  return 0;
}

// One distinct TiledEvictable among the operands and its tile reader.
struct Reader {
  PyObject* te = nullptr;  // borrowed (the operand tensor holds it)
  Ref reader;
  // Per tile of the chunk last read: the host address of the span's first
  // slot, and that slot relative to the tile's first slot.
  std::vector<const char*> at;
  std::vector<int64_t> first;
};

// The operation's checks, as its _forward makes them; false (nothing raised)
// when any fails or the tile-by-tile path does not apply.
struct Plan {
  Kind kind;
  const char* name;
  Operand ops[2];
  int nops = 1;
  PyObject* scalar = nullptr;
  sw::Layout views[3];  // the operands over the output shape, then the output (elementwise kinds)
  sw::Layout out;
  sw::TileSplit split;
  std::vector<Reader> readers;
  int reader_of[2] = {-1, -1};  // operand -> readers index, or -1 for a dense operand
  int64_t T = 0;
};

bool eligible_operand(const Operand& o) { return !o.tiled || o.cls == &CPU_Type; }

bool plan_forward(PyObject* op, PyObject* args, Plan* p) {
  PyTypeObject* type = Py_TYPE(op);
  Py_ssize_t arity = 2;
  if (type == &AddOperation_Type) p->kind = Kind::Add, p->name = "add";
  else if (type == &MulOperation_Type) p->kind = Kind::Mul, p->name = "mul";
  else if (type == &ReluOperation_Type) p->kind = Kind::Relu, p->name = "relu", arity = 1;
  else if (type == &ReduceSumOperation_Type) p->kind = Kind::Sum, p->name = "reduce_sum", arity = 1;
  else return false;
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != arity) return false;
  bool any = false;
  for (Py_ssize_t i = 0; i < arity; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (is_tensor(a) && as_tensor(a)->carrier && is_tiled_carrier(as_tensor(a)->carrier)) any = true;
  }
  if (!any) return false;
  // The same checks as _forward; on failure _forward raises them itself.
  Operand& a = p->ops[0];
  Operand& b = p->ops[1];
  if (compute_operand(PyTuple_GET_ITEM(args, 0), p->name, &a) < 0) return false;
  if (arity == 2) {
    PyObject* y = PyTuple_GET_ITEM(args, 1);
    if (p->kind == Kind::Mul && !is_tensor(y)) {
      if (!is_scalar(y) || (a.dtype == DTypeCode::Int32 && !PyLong_Check(y))) return false;
      p->kind = Kind::MulScalar;
      p->scalar = y;
    } else {
      if (compute_operand(y, p->name, &b) < 0 || check_pair(a, b, p->name) < 0) return false;
      p->nops = 2;
    }
  }
  for (int i = 0; i < p->nops; ++i)
    if (!eligible_operand(p->ops[i]) || !K::supports(p->ops[i].dtype) || (!p->ops[i].tiled && !p->ops[i].host))
      return false;
  // Output shape and every operand over it (broadcast), the tiled ones unbroadcast.
  std::vector<const sw::Layout*> layouts;
  try {
    sw::IntTree shape = a.L().shape();
    if (p->nops == 2) shape = sw::broadcast_shapes(a.L().shape(), b.L().shape());
    for (int i = 0; i < p->nops; ++i) {
      if (p->ops[i].tiled && !(p->ops[i].L().shape() == shape)) return false;
      p->views[i] = p->ops[i].L().broadcast_to(shape);
      layouts.push_back(&p->views[i]);
    }
    if (p->kind == Kind::Sum) {
      p->out = sw::compact(sw::IntTree::node({}));
    } else {
      p->out = sw::compact(shape);
      p->views[p->nops] = p->out;
      layouts.push_back(&p->views[p->nops]);
    }
  } catch (...) {
    return false;
  }
  // One tile grid for every tiled operand.
  std::vector<int64_t> grid, tile;
  for (int i = 0; i < p->nops; ++i) {
    if (!p->ops[i].tiled) continue;
    std::vector<int64_t> g, t;
    if (extents_of(p->ops[i].tiled, "grid_shape", &g) < 0 || extents_of(p->ops[i].tiled, "tile_shape", &t) < 0) {
      PyErr_Clear();
      return false;
    }
    if (!grid.empty() && (g != grid || t != tile)) return false;
    grid = g, tile = t;
    int r = -1;
    for (size_t j = 0; j < p->readers.size(); ++j)
      if (p->readers[j].te == p->ops[i].tiled) r = static_cast<int>(j);
    if (r < 0) {
      p->readers.push_back(Reader{p->ops[i].tiled, Ref(), {}, {}});
      r = static_cast<int>(p->readers.size()) - 1;
    }
    p->reader_of[i] = r;
  }
  try {
    std::optional<sw::TileSplit> split = sw::split_tiles(layouts, tile, grid);
    if (!split) return false;
    p->split = std::move(*split);
  } catch (...) {
    return false;
  }
  p->T = 1;
  for (int64_t e : tile) p->T *= e;
  // Every tiled operand's tile k must lie in carrier tile k (the footprint
  // rule _check_operand enforced guarantees it; checked, not assumed).
  for (int i = 0; i < p->nops; ++i) {
    if (!p->ops[i].tiled) continue;
    const auto [lo, hi] = sw::leaf_reach(p->split.leaves[i]);
    for (size_t k = 0; k < p->split.offsets.size(); ++k) {
      const int64_t first = p->ops[i].offset + p->split.offsets[k][i];
      const int64_t base = static_cast<int64_t>(k) * p->T;
      if (first + lo < base || first + hi >= base + p->T) return false;
    }
  }
  return true;
}

// One chunk of reads from reader r: spans[j] = (k, first, count) of tile
// k (slots relative to its first slot); r.at[k] / r.first[k] are set. last
// says these are the tiles' last reads (their transfers end).
int read_spans(Reader& r, const char* name, const std::vector<std::array<int64_t, 3>>& spans, bool last) {
  Ref list = Ref::steal(PyList_New(static_cast<Py_ssize_t>(spans.size())));
  if (!list) return -1;
  for (size_t j = 0; j < spans.size(); ++j) {
    PyObject* t = Py_BuildValue("(LLLO)", static_cast<long long>(spans[j][0]), static_cast<long long>(spans[j][1]),
                                static_cast<long long>(spans[j][2]), last ? Py_True : Py_False);
    if (!t) return -1;
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(j), t);
  }
  Ref got = Ref::steal(call_hook(name, "(): ", r.reader.get(), "tiles", list.get()));
  if (!got) return -1;
  if (!PyList_Check(got.get()) || PyList_GET_SIZE(got.get()) != static_cast<Py_ssize_t>(spans.size())) {
    PyErr_Format(PyExc_TypeError, "%s(): the tile reader must give one (carrier, offset) per span", name);
    return -1;
  }
  for (size_t j = 0; j < spans.size(); ++j) {
    PyObject* pair = PyList_GET_ITEM(got.get(), static_cast<Py_ssize_t>(j));
    PyObject *c, *off;
    if (!PyTuple_Check(pair) || !PyArg_UnpackTuple(pair, "tiles", 2, 2, &c, &off) || !is_carrier(c)) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s(): the tile reader must give (carrier, offset) pairs", name);
      return -1;
    }
    const Py_ssize_t o = PyLong_AsSsize_t(off);
    if (o == -1 && PyErr_Occurred()) return -1;
    const void* data = Py_TYPE(c) == &CPU_Type ? carrier_host_data(c) : nullptr;
    const Py_ssize_t n = data ? carrier_size(c) : -1;
    if (!data || o < 0 || n < 0 || o > n || n - o < spans[j][2]) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "%s(): tile %lld of the TiledEvictable has no CPU host storage", name,
                     static_cast<long long>(spans[j][0]));
      return -1;
    }
    const size_t k = static_cast<size_t>(spans[j][0]);
    r.at[k] = static_cast<const char*>(data) + static_cast<size_t>(o) * sizeof(float);  // both kernel dtypes: 4 bytes
    r.first[k] = spans[j][1];
  }
  return 0;
}

// Bands: every tile is computed in `bands` parts along its slowest
// within-tile leaf, band b of every tile before band b + 1. The compact
// result interleaves the tiles (the grid index is part of every mode), so
// a whole tile's result is spread over the whole result; in the canonical
// layout a band of every tile is one stretch of it, written while it is in
// cache.
struct Bands {
  int64_t count = 1;
  size_t leaf = 0;
  std::vector<Leaves> leaves;  // per operand (then the output): a band's leaves
  // Each band is computed in `subs` parts of `sub` leaves: the result of a
  // part of every tile is small enough (about 256 KiB) to stay in cache.
  int64_t subs = 1;
  std::vector<Leaves> sub;
};

Bands plan_bands(const Plan& p) {
  Bands b;
  b.leaves = p.split.leaves;
  const int64_t tiles = static_cast<int64_t>(p.split.offsets.size());
  b.sub = b.leaves;
  if (p.kind == Kind::Sum || tiles < 2) return b;
  const Leaves& l = p.split.leaves[0];
  size_t j = l.size();
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i].extent > 1) j = i;
  if (j == l.size()) return b;
  const int64_t e = l[j].extent;
  for (int64_t d = std::min(e, tiles); d > 1; --d) {
    if (e % d == 0) {
      b.count = d;
      break;
    }
  }
  b.leaf = j;
  const int64_t eb = e / b.count;
  for (Leaves& lv : b.leaves) lv[j].extent = eb;
  const int64_t band_bytes = p.out.size() / b.count * static_cast<int64_t>(sw::itemsize(p.ops[0].dtype));
  const int64_t want = std::max<int64_t>(1, band_bytes / (256 << 10));
  for (int64_t d = std::min(eb, want); d > 1; --d) {
    if (eb % d == 0) {
      b.subs = d;
      break;
    }
  }
  b.sub = b.leaves;
  for (Leaves& lv : b.sub) lv[j].extent = eb / b.subs;
  return b;
}

PyObject* run_tiles(PyObject* op, Plan& p) {
  const Operand& a = p.ops[0];
  const size_t item = sw::itemsize(a.dtype);
  double sd = 0;
  long long si = 0;
  if (p.kind == Kind::MulScalar) {
    if (a.dtype == DTypeCode::Float32) {
      sd = PyFloat_AsDouble(p.scalar);
      if (sd == -1.0 && PyErr_Occurred()) return nullptr;
    } else {
      int overflow = 0;
      si = PyLong_AsLongLongAndOverflow(p.scalar, &overflow);
      if (si == -1 && PyErr_Occurred()) return nullptr;
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "mul(): Int32 result out of range");
        return nullptr;
      }
    }
  }
  Ref like = Ref::steal(PyObject_GetAttrString(p.readers[0].te, "primary"));
  if (!like) {
    autograd::add_error_context(p.name, "(): ");
    return nullptr;
  }
  void* data = nullptr;
  Ref result = Ref::steal(alloc_host(like.get(), p.out.size(), a.dtype, false, &data));
  if (!result) return nullptr;
  char* out = static_cast<char*>(data);
  const Bands bands = plan_bands(p);
  // The output's band leaves (reduce_sum has no output layout: the split
  // then holds the operands only).
  const Leaves& lo = p.kind == Kind::Sum ? bands.sub[0] : bands.sub[p.nops];
  const Leaves& l0 = bands.sub[0];
  const size_t jl = bands.leaf;
  // Within-band reach of each operand's leaves: a tiled operand reads the
  // slots between.
  std::vector<std::pair<int64_t, int64_t>> reach;
  for (int i = 0; i < p.nops; ++i) reach.push_back(sw::leaf_reach(bands.leaves[i]));
  double fsum = 0;
  int64_t isum = 0;
  const size_t tiles = p.split.offsets.size();
  for (Reader& r : p.readers) {
    r.at.assign(tiles, nullptr);
    r.first.assign(tiles, 0);
  }
  // rel(i, k, b): operand i's first index of band b of tile k, relative to
  // the tile's first slot (tiled) or to the operand's offset (dense); i ==
  // p.nops is the output (dense, not an entry of p.ops).
  const auto rel = [&](int i, size_t k, int64_t b) {
    const int64_t band_off = b * bands.leaves[i][jl].extent * p.split.leaves[i][jl].stride;
    return p.split.offsets[k][i] + band_off +
           (i < p.nops && p.ops[i].tiled ? p.ops[i].offset - static_cast<int64_t>(k) * p.T : 0);
  };
  std::vector<std::array<int64_t, 3>> spans;
  for (int64_t b = 0; b < bands.count; ++b) {
    size_t k0 = 0;
    while (k0 < tiles) {
      // A chunk of tiles whose spans together stay within about one tile.
      size_t k1 = k0;
      int64_t held = 0;
      std::vector<std::vector<std::array<int64_t, 3>>> per(p.readers.size());
      while (k1 < tiles) {
        int64_t add = 0;
        std::vector<std::array<int64_t, 3>> mine(p.readers.size());
        for (size_t r = 0; r < p.readers.size(); ++r) {
          int64_t first = INT64_MAX, end = INT64_MIN;
          for (int i = 0; i < p.nops; ++i) {
            if (p.reader_of[i] != static_cast<int>(r)) continue;
            first = std::min(first, rel(i, k1, b) + reach[i].first);
            end = std::max(end, rel(i, k1, b) + reach[i].second + 1);
          }
          mine[r] = {static_cast<int64_t>(k1), first, end - first};
          add = std::max(add, end - first);
        }
        if (k1 > k0 && held + add > p.T) break;
        held += add;
        for (size_t r = 0; r < p.readers.size(); ++r) per[r].push_back(mine[r]);
        ++k1;
      }
      for (size_t r = 0; r < p.readers.size(); ++r)
        if (read_spans(p.readers[r], p.name, per[r], b == bands.count - 1) < 0) return nullptr;
      for (int64_t sb = 0; sb < bands.subs; ++sb) {
        for (size_t k = k0; k < k1; ++k) {
          const auto at = [&](int i) -> const void* {
            const int64_t sub_off = sb * l0[jl].extent * p.split.leaves[i][jl].stride;
            const Operand& o = p.ops[i];
            if (o.tiled) {
              const Reader& r = p.readers[p.reader_of[i]];
              return r.at[k] + (rel(i, k, b) + sub_off - r.first[k]) * static_cast<int64_t>(item);
            }
            return static_cast<const char*>(o.at()) + (rel(i, k, b) + sub_off) * static_cast<int64_t>(item);
          };
          void* dst = nullptr;
          if (p.kind != Kind::Sum) {
            const int64_t off = rel(p.nops, k, b) + sb * lo[jl].extent * p.split.leaves[p.nops][jl].stride;
            dst = out + off * static_cast<int64_t>(item);
          }
          const int rc = forward_call(p.name, [&] {
            switch (p.kind) {
              case Kind::Add: K::add(a.dtype, at(0), l0, at(1), bands.sub[1], dst, lo); break;
              case Kind::Mul: K::mul(a.dtype, at(0), l0, at(1), bands.sub[1], dst, lo); break;
              case Kind::MulScalar:
                if (a.dtype == DTypeCode::Float32)
                  K::mul_scalar_f32(static_cast<const float*>(at(0)), l0, sd, static_cast<float*>(dst), lo);
                else
                  K::mul_scalar_i32(static_cast<const int32_t*>(at(0)), l0, si, static_cast<int32_t*>(dst), lo);
                break;
              case Kind::Relu: K::relu(a.dtype, at(0), l0, dst, lo); break;
              case Kind::Sum:
                if (a.dtype == DTypeCode::Float32) fsum += K::sum_f32(static_cast<const float*>(at(0)), l0);
                else isum += K::sum_i32(static_cast<const int32_t*>(at(0)), l0);
                break;
            }
          });
          if (rc < 0) return nullptr;
        }
      }
      k0 = k1;
    }
  }
  if (p.kind == Kind::Sum) {
    const int rc = forward_call(p.name, [&] {
      if (a.dtype == DTypeCode::Float32) {
        *static_cast<float*>(data) = static_cast<float>(fsum);
      } else {
        if (isum < INT32_MIN || isum > INT32_MAX) throw std::overflow_error("Int32 result out of range");
        *static_cast<int32_t*>(data) = static_cast<int32_t>(isum);
      }
    });
    if (rc < 0) return nullptr;
  }
  if (p.kind == Kind::MulScalar) Py_XSETREF(reinterpret_cast<MulOperationObject*>(op)->scalar, Py_NewRef(p.scalar));
  else if (p.kind == Kind::Mul) Py_CLEAR(reinterpret_cast<MulOperationObject*>(op)->scalar);
  return wrap(result.release(), p.out, nullptr);
}

// Ends every opened reader; ok says whether the operation succeeded. A
// failing close fails a successful operation; a failed operation keeps its
// own exception.
int close_readers(Plan& p, bool ok) {
  int rc = 0;
  for (Reader& r : p.readers) {
    if (!r.reader) continue;
    std::optional<ErrorGuard> keep;
    if (!ok) keep.emplace();
    Ref res = Ref::steal(PyObject_CallMethod(r.reader.get(), "close", "O", ok && rc == 0 ? Py_True : Py_False));
    if (!res) {
      if (ok && rc == 0) {
        autograd::add_error_context(p.name, "(): ");
        rc = -1;
      } else {
        PyErr_Clear();
      }
    }
    r.reader.reset();
  }
  return rc;
}

}  // namespace

bool tiled_forward(PyObject* op, PyObject* args, Ref* result) {
  Plan p;
  if (!plan_forward(op, args, &p)) {
    PyErr_Clear();
    return false;
  }
  // Every operand is valid: open a reader per distinct carrier (policy,
  // conflicts), then read tile by tile.
  Ref purpose = Ref::steal(PyUnicode_FromString("operation"));
  if (!purpose) return true;
  for (Reader& r : p.readers) {
    r.reader = Ref::steal(call_hook(p.name, "(): ", r.te, "_tile_reader", purpose.get()));
    if (!r.reader) {
      close_readers(p, false);
      return true;
    }
  }
  Ref r = Ref::steal(run_tiles(op, p));
  if (close_readers(p, bool(r)) < 0) r.reset();
  *result = std::move(r);
  return true;
}

}  // namespace swpy::ops

// Full TiledEvictable tensors computed tile by tile: the forward of add,
// mul, relu and reduce_sum (tiled_forward, called by Operation.forward) and
// the backward of mul and relu where it reads a tiled input's values
// (tiled_mul_grad, tiled_relu_grad, called by their backward).
//
// The tile reader (ops_tiled.cpp: tile_reader_*) hands out the values of
// spans of tiles a chunk at a time (in place when primary-resident in host
// memory, else through a staging buffer it reuses), the engine kernels compute that
// chunk's part of the result (sw::split_tiles gives every operand's
// within-tile leaves and per-tile offsets), so the work holds about one tile
// of values per tiled operand beyond its result. Elementwise results
// interleave the tiles, so tiles are computed in bands (see Bands), the
// reads of a band batched per chunk of tiles whose spans total about one
// tile. A backward writes the fresh gradient buffer exactly as the dense
// kernel would (same kernel, same coordinate-by-coordinate arithmetic), only
// reading the tiled input band by band instead of from a dense copy.
//
// The primary may be any class the operations compute in: CPU, a CPU
// subclass, or Generic (Float32). Only an exact CPU primary's tiles are read
// in place; the reader stages the others into a CPU buffer. The result is in
// the primary's class as the spec requires: a CPU subclass allocates it
// itself (alloc_host, as the dense path does); a Generic primary gets the
// host result copied into a fresh Generic carrier (the reader's as_primary).
//
// What this path does not take goes to the dense path (ops_tiled.cpp), and
// why: a layout that does not split at the tile grid or a tiled operand
// broadcast to another shape (no per-tile layout exists), a gradient summed
// over broadcast coordinates both within and across tiles (its double sums
// run in coordinate order, which whole tiles in tile order do not keep: see
// tile_order_sums), an Int32 Generic
// primary (its results are range checked by Generic's coercion, with its own
// error), a dtype the kernels lack, a cotangent without host memory, and any
// bad argument (the dense path raises what is wrong).
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "autograd/ops_support.hpp"
#include "autograd/ops_tiled.hpp"
#include "tiled_object.hpp"
#include "tiled/tile_split.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

namespace {

// MulGradSum: mul's gradient of an operand broadcast to the tiled one's
// shape, summed over the broadcast coordinates (see tiled_mul_grad).
enum class Kind { Add, Mul, MulScalar, Relu, Sum, ReluGrad, MulGrad, MulGradSum };

// The direct operations read tiled operands tile by tile unless a test
// switched that off (tiled_option("dense_only")).
bool dense_only() {
  Ref on = Ref::steal(tiled_option("dense_only"));
  return on && PyObject_IsTrue(on.get()) == 1;
}

// One distinct TiledEvictable among the operands and its tile reader.
struct Reader {
  PyObject* te = nullptr;  // borrowed (the operand tensor holds it)
  TileReader* reader = nullptr;
  // Per tile of the chunk last read: the host address of the span's first
  // slot, and that slot relative to the tile's first slot.
  std::vector<const char*> at;
  std::vector<int64_t> first;
};

// One tile-by-tile computation: its operands, layouts, split and result.
struct Plan {
  Kind kind;
  const char* name;
  bool backward = false;  // errors read "op backward: ..." (else "op(): ...")
  Operand ops[2];
  int nops = 1;
  PyObject* scalar = nullptr;
  sw::Layout views[3];  // the operands over the output shape, then the output (elementwise kinds)
  sw::Layout out;       // the result's layout: compact (forward) or the gradient layout (backward)
  sw::TileSplit split;
  std::vector<Reader> readers;
  int reader_of[2] = {-1, -1};  // operand -> readers index, or -1 for a dense operand
  int64_t T = 0;
  // The result: out_slots slots of out_dtype, in like's class when it has
  // host memory (else in CPU, copied into the primary's class at the end).
  Ref like;
  bool host_like = true;
  DTypeCode out_dtype = DTypeCode::Float32;
  int64_t out_slots = 0;
  bool zero = false;
  PyObject* out_obj = nullptr;  // the result's Layout object, when one exists (borrowed)

  const char* what() const { return backward ? " backward: " : "(): "; }
};

template <class F>
int engine(const Plan& p, F&& f) {
  return p.backward ? backward_call(p.name, std::forward<F>(f)) : forward_call(p.name, std::forward<F>(f));
}

// A tiled operand this path reads: any primary class the operations compute
// in, with a kernel dtype; a Generic primary in Float32 only (see the top).
bool eligible_operand(const Operand& o) {
  if (!K::supports(o.dtype)) return false;
  if (!o.tiled) return o.host != nullptr;
  if (PyType_IsSubtype(o.cls, &CPU_Type)) return true;
  return PyType_IsSubtype(o.cls, &Generic_Type) && o.dtype == DTypeCode::Float32;
}

// Every operand over shape (broadcast; a tiled one must have that very
// shape), the output layout p->out (none for reduce_sum), one tile grid for
// every tiled operand, and the split of all of them at it. False when the
// work cannot run tile by tile.
bool plan_tiles(Plan* p, const sw::IntTree& shape) {
  std::vector<const sw::Layout*> layouts;
  try {
    for (int i = 0; i < p->nops; ++i) {
      if (p->ops[i].tiled && !(p->ops[i].L().shape() == shape)) return false;
      p->views[i] = p->ops[i].L().broadcast_to(shape);
      layouts.push_back(&p->views[i]);
    }
    if (p->kind != Kind::Sum) {
      // (a summed gradient: its layout over the coordinates, stride 0 where they sum)
      p->views[p->nops] = p->kind == Kind::MulGradSum ? p->out.broadcast_to(shape) : p->out;
      if (!(p->views[p->nops].shape() == shape)) return false;
      layouts.push_back(&p->views[p->nops]);
    }
  } catch (...) {
    return false;
  }
  std::vector<int64_t> grid, tile;
  for (int i = 0; i < p->nops; ++i) {
    if (!p->ops[i].tiled) continue;
    if (!is_tiled(p->ops[i].tiled) || dense_only()) return false;
    const sw::tiled::Geometry& geo = tiled_state(p->ops[i].tiled).geom;
    if (geo.kind() != sw::tiled::GeometryKind::Tiles) return false;  // bands assume contiguous tile-major tiles
    const std::vector<int64_t>& g = geo.grid();
    const std::vector<int64_t>& t = geo.tile();
    if (!grid.empty() && (g != grid || t != tile)) return false;
    grid = g, tile = t;
    int r = -1;
    for (size_t j = 0; j < p->readers.size(); ++j)
      if (p->readers[j].te == p->ops[i].tiled) r = static_cast<int>(j);
    if (r < 0) {
      p->readers.push_back(Reader{p->ops[i].tiled, nullptr, {}, {}});
      r = static_cast<int>(p->readers.size()) - 1;
    }
    p->reader_of[i] = r;
  }
  if (p->readers.empty()) return false;
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

// The operation's checks, as its _forward makes them; false (nothing raised)
// when any fails or the tile-by-tile path does not apply.
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
    if (!eligible_operand(p->ops[i])) return false;
  // Output shape and every operand over it (broadcast), the tiled ones unbroadcast.
  try {
    sw::IntTree shape = a.L().shape();
    if (p->nops == 2) shape = sw::broadcast_shapes(a.L().shape(), b.L().shape());
    p->out = p->kind == Kind::Sum ? sw::compact(sw::IntTree::node({})) : sw::compact(shape);
    if (!plan_tiles(p, shape)) return false;
  } catch (...) {
    return false;
  }
  // The result: the primary's class (both operands compute in it).
  p->like = Ref::borrow(tiled_primary(p->readers[0].te));
  p->host_like = PyObject_TypeCheck(p->like.get(), &CPU_Type);
  p->out_dtype = a.dtype;
  p->out_slots = p->out.size();
  return true;
}
// One chunk of reads from reader r: spans[j] = (k, first, count) of tile
// k (slots relative to its first slot); r.at[k] / r.first[k] are set. last
// says these are the tiles' last reads (their transfers end).
int read_spans(const Plan& p, Reader& r, const std::vector<std::array<int64_t, 3>>& spans) {
  std::vector<const char*> at;
  if (tile_reader_read(r.reader, spans, &at) < 0) return autograd::add_error_context(p.name, p.what());
  for (size_t j = 0; j < spans.size(); ++j) {
    const size_t k = static_cast<size_t>(spans[j][0]);
    r.at[k] = at[j];
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
  void* data = nullptr;
  Ref result;
  if (p.host_like) {
    result = Ref::steal(alloc_host(p.like.get(), p.out_slots, p.out_dtype, p.zero, &data));
  } else {
    // (a primary without host memory: computed in CPU, copied over at the end)
    result = Ref::steal(cpu_new(p.out_slots, p.out_dtype, true, !p.zero));
    if (result) data = cpu_storage_of(result.get()).data;
  }
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
  // MulGradSum: the products of a tile (rounded to binary32, compact) and
  // the double sums of every gradient slot, rounded once at the end: what
  // mul_broadcast_backward computes over the whole tensor.
  std::vector<double> acc;
  std::vector<float> prod;
  Leaves lc;
  if (p.kind == Kind::MulGradSum && engine(p, [&] {
        acc.assign(static_cast<size_t>(p.out_slots), 0.0);
        int64_t stride = 1;
        for (const sw::LeafMode& m : l0) {
          lc.push_back({m.extent, stride});
          stride *= m.extent;
        }
        prod.resize(static_cast<size_t>(stride));
      }) < 0)
    return nullptr;
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
        if (read_spans(p, p.readers[r], per[r]) < 0) return nullptr;
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
          int64_t off = 0;
          if (p.kind != Kind::Sum) {
            off = rel(p.nops, k, b) + sb * lo[jl].extent * p.split.leaves[p.nops][jl].stride;
            dst = out + off * static_cast<int64_t>(item);
          }
          const int rc = engine(p, [&] {
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
              case Kind::ReluGrad:  // (relu_grad_host's kernel: g where x > 0)
                K::relu_backward(static_cast<const float*>(at(0)), l0, static_cast<const float*>(at(1)),
                                 bands.sub[1], static_cast<float*>(dst), lo);
                break;
              case Kind::MulGrad:  // (mul_grad_host's kernel when nothing is summed: g * other)
                K::mul(DTypeCode::Float32, at(0), l0, at(1), bands.sub[1], dst, lo);
                break;
              case Kind::MulGradSum:
                K::mul(DTypeCode::Float32, at(0), l0, at(1), bands.sub[1], prod.data(), lc);
                K::sum_into(prod.data(), lc, acc.data() + off, lo);
                break;
            }
          });
          if (rc < 0) return nullptr;
        }
      }
      k0 = k1;
    }
  }
  if (p.kind == Kind::MulGradSum &&
      engine(p, [&] { K::round_to_f32(acc.data(), static_cast<float*>(data), p.out_slots); }) < 0)
    return nullptr;
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
  if (!p.host_like) {
    result = Ref::steal(tile_reader_as_primary(p.readers[0].reader, result.get()));
    if (!result) return nullptr;
  }
  return wrap(result.release(), p.out, p.out_obj);
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
    if (tile_reader_close(r.reader, ok && rc == 0) < 0) {
      if (ok && rc == 0) {
        autograd::add_error_context(p.name, p.what());
        rc = -1;
      } else {
        PyErr_Clear();
      }
    }
    r.reader = nullptr;
  }
  return rc;
}

// Opens a reader per distinct tiled carrier (policy, conflicts; purpose
// "operation" or "backward"), runs, closes. *result is the result, or empty
// with the exception set.
void run_plan(PyObject* op, Plan& p, const char* purpose, Ref* result) {
  result->reset();
  for (Reader& r : p.readers) {
    r.reader = tile_reader_open(r.te, purpose);
    if (!r.reader) {
      autograd::add_error_context(p.name, p.what());
      close_readers(p, false);
      return;
    }
  }
  Ref r = Ref::steal(run_tiles(op, p));
  if (close_readers(p, bool(r)) < 0) r.reset();
  *result = std::move(r);
}

// A saved input of a backward as a tiled operand: 1 when it is a full
// TiledEvictable tensor (o->tiled and o->cls set), 0 when it is not (or not
// one this path reads), -1 with an exception (the checks saved_operand makes).
int saved_tiled(PyObject* t, const char* op, Operand* o) {
  if (saved_operand(t, op, o) < 0) return -1;
  if (o->host || !is_tiled_carrier(o->carrier)) return 0;
  if (tiled_check_live(o->carrier) < 0) return autograd::add_error_context(op, " backward: ");
  o->tiled = o->carrier;
  o->cls = tiled_primary_class(o->carrier);
  // The kernels read Float32 host values (a CPU-class primary's, staged as needed).
  return o->dtype == DTypeCode::Float32 && PyType_IsSubtype(o->cls, &CPU_Type) ? 1 : 0;
}

// A summed gradient adds the products landing on a slot in coordinate order
// (colexicographic over the leaves; double sums are not associative). Tile
// by tile gives the same order when the summed coordinates lie all within
// the tiles (each slot's sum is one tile's; bands cut the slowest
// within-tile leaf into consecutive ranges, which keeps colexicographic
// order) or all across them (a slot takes one product per tile, in ordinal
// order, which is the grid coordinates' colexicographic order; a band holds
// a coordinate of every tile). When both, a slot's within-tile products
// would all come before its next tile's, so the dense path sums.
bool tile_order_sums(const Plan& p) {
  bool within = false;
  for (const sw::LeafMode& m : p.split.leaves[p.nops]) within = within || (m.stride == 0 && m.extent > 1);
  std::vector<int64_t> firsts;
  for (const std::vector<int64_t>& o : p.split.offsets) firsts.push_back(o[p.nops]);
  std::sort(firsts.begin(), firsts.end());
  const bool across = std::adjacent_find(firsts.begin(), firsts.end()) != firsts.end();
  return !(within && across);
}

// The cotangent as the backward's dense operand (a view of the caller's).
void copy_operand(const Operand& from, Operand* to) {
  to->tensor = from.tensor;
  to->carrier = from.carrier;
  to->offset = from.offset;
  to->layout = from.layout;
  to->dtype = from.dtype;
  to->host = from.host;
  to->cls = from.cls;
}

// The gradient result of a backward plan: Float32 in g's class, laid out by
// gp (its Layout object x's own when the layouts agree).
template <class GradPlanT>
void gradient_result(Plan* p, const Operand& g, PyObject* x, const GradPlanT& gp) {
  p->out = gp.layout;
  p->out_obj = grad_layout_object(x, gp.layout);
  p->like = Ref::borrow(g.carrier);
  p->host_like = true;
  p->out_dtype = DTypeCode::Float32;
  p->out_slots = gp.slots();
  p->zero = gp.zero_fill;
}

}  // namespace

bool tiled_forward(PyObject* op, PyObject* args, Ref* result) {
  Plan p;
  if (!plan_forward(op, args, &p)) {
    PyErr_Clear();
    return false;
  }
  // Every operand is valid: read tile by tile.
  run_plan(op, p, "operation", result);
  return true;
}

bool tiled_relu_grad(const Operand& g, PyObject* x, Ref* result) {
  Plan p;
  p.kind = Kind::ReluGrad, p.name = "relu", p.backward = true, p.nops = 2;
  if (!g.host_f32()) return false;
  copy_operand(g, &p.ops[0]);
  const int t = saved_tiled(x, "relu", &p.ops[1]);
  if (t < 0) {
    result->reset();
    return true;
  }
  if (t == 0) return false;
  sw::ops::GradPlan gp;
  try {
    gp = sw::ops::plan_relu_grad(g.L(), p.ops[1].L());
  } catch (...) {
    return false;  // (the dense path raises it)
  }
  gradient_result(&p, g, x, gp);
  if (!plan_tiles(&p, p.ops[1].L().shape())) {
    PyErr_Clear();
    return false;
  }
  run_plan(nullptr, p, "backward", result);
  return true;
}

bool tiled_mul_grad(const Operand& g, PyObject* x, PyObject* other, Ref* result) {
  Plan p;
  p.kind = Kind::MulGrad, p.name = "mul", p.backward = true, p.nops = 2;
  if (!g.host_f32()) return false;
  copy_operand(g, &p.ops[0]);
  const int t = saved_tiled(other, "mul", &p.ops[1]);
  if (t < 0) {
    result->reset();
    return true;
  }
  if (t == 0) return false;
  sw::ops::MulGradPlan gp;
  try {
    gp = sw::ops::plan_mul_grad(g.L(), layout_of(as_tensor(x)->layout), &p.ops[1].L());
  } catch (...) {
    return false;
  }
  if (gp.reduce) p.kind = Kind::MulGradSum;
  else if (!(layout_of(as_tensor(x)->layout).shape() == g.L().shape())) return false;
  gradient_result(&p, g, x, gp);
  if (!plan_tiles(&p, g.L().shape())) {
    PyErr_Clear();
    return false;
  }
  if (p.kind == Kind::MulGradSum && !tile_order_sums(p)) return false;
  run_plan(nullptr, p, "backward", result);
  return true;
}

}  // namespace swpy::ops

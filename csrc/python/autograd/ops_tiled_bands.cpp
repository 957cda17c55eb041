// Full TiledEvictable tensors computed tile by tile: the forward of add,
// mul, relu and reduce_sum (tiled_forward, called by Operation.forward) and
// the backward of mul and relu where it reads a tiled input's values
// (tiled_mul_grad, tiled_relu_grad, called by their backward).
//
// The planning and the loop are the engine's (csrc/engine/tiled/bands: every
// operand split at the tile grid, tiles cut into bands, a chunk of about one
// tile read at a time); this file checks the operands as the operation does,
// allocates the result, and reads the tiles through the tile reader
// (ops_tiled.cpp: in place when primary-resident in host memory, else
// through a staging buffer it reuses).
//
// The primary may be any class the operations compute in: CPU, a CPU
// subclass, or Generic (Float32). Only an exact CPU primary's tiles are read
// in place; the reader stages the others into a CPU buffer. The result is in
// the primary's class as the spec requires: a CPU subclass allocates it
// itself (alloc_host, as the dense path does); a Generic primary gets the
// host result copied into a fresh Generic carrier.
//
// What this path does not take goes to the dense path (ops_tiled.cpp), and
// why: a layout that does not split at the tile grid or a tiled operand
// broadcast to another shape (no per-tile layout exists), a gradient summed
// over broadcast coordinates both within and across tiles (its double sums
// run in coordinate order, which whole tiles in tile order do not keep), an
// Int32 Generic primary (its results are range checked by Generic's
// coercion, with its own error), a dtype the kernels lack, a cotangent
// without host memory, a geometry other than "tiles", and any bad argument
// (the dense path raises what is wrong).
#include <optional>
#include <stdexcept>
#include <vector>

#include "autograd/ops_support.hpp"
#include "autograd/ops_tiled.hpp"
#include "layout/algebra.hpp"
#include "tiled_object.hpp"
#include "tiled/bands.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

namespace {

using sw::tiled::BandKind;

// The direct operations read tiled operands tile by tile unless a test
// switched that off (tiled_option("dense_only")).
bool dense_only() {
  Ref on = Ref::steal(tiled_option("dense_only"));
  return on && PyObject_IsTrue(on.get()) == 1;
}

// One tile-by-tile computation: the engine's work, the tiled carriers it
// reads (one reader each) and the result.
struct Plan {
  sw::tiled::BandWork w;
  const char* name = "";
  bool backward = false;  // errors read "op backward: ..." (else "op(): ...")
  PyObject* scalar = nullptr;
  std::vector<PyObject*> tiled;  // per reader: its TiledEvictable (borrowed; the operands hold them)
  std::vector<TileReader*> readers;
  // The result: w.out_slots slots of out_dtype, in like's class when it has
  // host memory (else in CPU, copied into the primary's class at the end).
  Ref like;
  bool host_like = true;
  DTypeCode out_dtype = DTypeCode::Float32;
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

// Adds operand o to the work (a tiled one with its carrier's grid: every
// tiled operand must share one, the "tiles" geometry). False when the work
// cannot run tile by tile.
bool add_operand(Plan* p, const Operand& o) {
  sw::tiled::BandOperand b;
  b.layout = o.L();
  b.offset = o.offset;
  if (o.tiled) {
    if (!is_tiled(o.tiled) || dense_only()) return false;
    const sw::tiled::Geometry& geo = tiled_state(o.tiled).geom;
    if (geo.kind() != sw::tiled::GeometryKind::Tiles) return false;  // bands read tile-major carriers
    if (!p->w.grid.empty() && (geo.grid() != p->w.grid || geo.tile() != p->w.tile)) return false;
    p->w.grid = geo.grid();
    p->w.tile = geo.tile();
    b.tiled = true;
    for (size_t r = 0; r < p->tiled.size() && b.reader < 0; ++r)
      if (p->tiled[r] == o.tiled) b.reader = static_cast<int>(r);
    if (b.reader < 0) {
      b.reader = static_cast<int>(p->tiled.size());
      p->tiled.push_back(o.tiled);
    }
  } else {
    b.host = static_cast<const char*>(o.host);
  }
  p->w.ops.push_back(std::move(b));
  return true;
}

// The operation's checks, as its _forward makes them; false (nothing raised)
// when any fails or the tile-by-tile path does not apply.
bool plan_forward(PyObject* op, PyObject* args, Plan* p) {
  PyTypeObject* type = Py_TYPE(op);
  Py_ssize_t arity = 2;
  BandKind kind;
  if (type == &AddOperation_Type) kind = BandKind::Add, p->name = "add";
  else if (type == &MulOperation_Type) kind = BandKind::Mul, p->name = "mul";
  else if (type == &ReluOperation_Type) kind = BandKind::Relu, p->name = "relu", arity = 1;
  else if (type == &ReduceSumOperation_Type) kind = BandKind::Sum, p->name = "reduce_sum", arity = 1;
  else return false;
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != arity) return false;
  bool any = false;
  for (Py_ssize_t i = 0; i < arity; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (is_tensor(a) && as_tensor(a)->carrier && is_tiled_carrier(as_tensor(a)->carrier)) any = true;
  }
  if (!any) return false;
  // The same checks as _forward; on failure _forward raises them itself.
  Operand a, b;
  int nops = 1;
  if (compute_operand(PyTuple_GET_ITEM(args, 0), p->name, &a) < 0) return false;
  if (arity == 2) {
    PyObject* y = PyTuple_GET_ITEM(args, 1);
    if (kind == BandKind::Mul && !is_tensor(y)) {
      if (!is_scalar(y) || (a.dtype == DTypeCode::Int32 && !PyLong_Check(y))) return false;
      kind = BandKind::MulScalar;
      p->scalar = y;
      if (a.dtype == DTypeCode::Float32) {
        p->w.scalar_f = PyFloat_AsDouble(y);
        if (p->w.scalar_f == -1.0 && PyErr_Occurred()) return false;
      } else {
        int overflow = 0;
        p->w.scalar_i = PyLong_AsLongLongAndOverflow(y, &overflow);
        if (overflow || (p->w.scalar_i == -1 && PyErr_Occurred())) return false;  // (the dense path raises)
      }
    } else {
      if (compute_operand(y, p->name, &b) < 0 || check_pair(a, b, p->name) < 0) return false;
      nops = 2;
    }
  }
  if (!eligible_operand(a) || (nops == 2 && !eligible_operand(b))) return false;
  p->w.kind = kind;
  p->w.dtype = a.dtype;
  if (!add_operand(p, a) || (nops == 2 && !add_operand(p, b))) return false;
  // The output's shape (broadcast); a shape mismatch is the dense path's error.
  sw::IntTree shape = a.L().shape();
  if (nops == 2 && engine_call([&] { shape = sw::broadcast_shapes(a.L().shape(), b.L().shape()); }) < 0)
    return false;
  p->w.out = kind == BandKind::Sum ? sw::compact(sw::IntTree::node({})) : sw::compact(shape);
  p->w.out_slots = p->w.out.size();
  if (!sw::tiled::plan_bands(p->w, shape)) return false;
  // The result: the primary's class (both operands compute in it).
  p->like = Ref::borrow(tiled_primary(p->tiled[0]));
  p->host_like = PyObject_TypeCheck(p->like.get(), &CPU_Type);
  p->out_dtype = a.dtype;
  return true;
}

PyObject* run_tiles(PyObject* op, Plan& p) {
  void* data = nullptr;
  Ref result;
  if (p.host_like) {
    result = Ref::steal(alloc_host(p.like.get(), p.w.out_slots, p.out_dtype, p.zero, &data));
  } else {
    // (a primary without host memory: computed in CPU, copied over at the end)
    result = Ref::steal(cpu_new(p.w.out_slots, p.out_dtype, true, !p.zero));
    if (result) data = cpu_storage_of(result.get()).data;
  }
  if (!result) return nullptr;
  bool read_failed = false;
  const auto read = [&](int r, const std::vector<std::array<int64_t, 3>>& spans, std::vector<const char*>* at) {
    if (tile_reader_read(p.readers[static_cast<size_t>(r)], spans, at) == 0) return true;
    read_failed = true;
    return false;
  };
  bool ran = false;
  if (engine(p, [&] { ran = sw::tiled::run_bands(p.w, data, read); }) < 0) return nullptr;
  if (!ran || read_failed) return add_error_context(p.name, p.what()), nullptr;
  if (p.w.kind == BandKind::MulScalar) Py_XSETREF(reinterpret_cast<MulOperationObject*>(op)->scalar, Py_NewRef(p.scalar));
  else if (p.w.kind == BandKind::Mul) Py_CLEAR(reinterpret_cast<MulOperationObject*>(op)->scalar);
  if (!p.host_like) {
    result = Ref::steal(tile_reader_as_primary(p.readers[0], result.get()));
    if (!result) return nullptr;
  }
  return wrap(result.release(), p.w.out, p.out_obj);
}

// Ends every opened reader; ok says whether the operation succeeded. A
// failing close fails a successful operation; a failed operation keeps its
// own exception.
int close_readers(Plan& p, bool ok) {
  int rc = 0;
  for (TileReader*& r : p.readers) {
    if (!r) continue;
    std::optional<ErrorGuard> keep;
    if (!ok) keep.emplace();
    if (tile_reader_close(r, ok && rc == 0) < 0) {
      if (ok && rc == 0) {
        add_error_context(p.name, p.what());
        rc = -1;
      } else {
        PyErr_Clear();
      }
    }
    r = nullptr;
  }
  return rc;
}

// Opens a reader per distinct tiled carrier (policy, conflicts; purpose
// "operation" or "backward"), runs, closes. *result is the result, or empty
// with the exception set.
void run_plan(PyObject* op, Plan& p, const char* purpose, Ref* result) {
  result->reset();
  for (PyObject* te : p.tiled) {
    TileReader* r = tile_reader_open(te, purpose);
    if (!r) {
      add_error_context(p.name, p.what());
      close_readers(p, false);
      return;
    }
    p.readers.push_back(r);
  }
  Ref r = Ref::steal(run_tiles(op, p));
  if (close_readers(p, bool(r)) < 0) r.reset();
  *result = std::move(r);
}

// A saved input of a backward as a tiled operand: 1 when it is a full
// TiledEvictable tensor this path reads (o->tiled and o->cls set), 0 when
// it is not, -1 with an exception (the checks saved_operand makes).
int saved_tiled(PyObject* t, const char* op, Operand* o) {
  if (saved_operand(t, op, o) < 0) return -1;
  if (o->host || !is_tiled_carrier(o->carrier)) return 0;
  if (tiled_check_live(o->carrier) < 0) return add_error_context(op, " backward: ");
  o->tiled = o->carrier;
  o->cls = tiled_primary_class(o->carrier);
  // The kernels read Float32 host values (a CPU-class primary's, staged as needed).
  return o->dtype == DTypeCode::Float32 && PyType_IsSubtype(o->cls, &CPU_Type) ? 1 : 0;
}

// A backward plan: the cotangent g (dense) and the tiled saved input x, the
// gradient Float32 in g's class laid out by gp (its Layout object x's own
// when the layouts agree). False when the work cannot run tile by tile.
template <class GradPlanT>
bool backward_plan(Plan* p, const Operand& g, const Operand& tiled, PyObject* x, const GradPlanT& gp,
                   const sw::IntTree& shape) {
  p->w.dtype = DTypeCode::Float32;
  if (!add_operand(p, g) || !add_operand(p, tiled)) return false;
  p->w.out = gp.layout;
  p->w.out_slots = gp.slots();
  p->out_obj = grad_layout_object(x, gp.layout);
  p->like = Ref::borrow(g.carrier);
  p->host_like = true;
  p->out_dtype = DTypeCode::Float32;
  p->zero = gp.zero_fill;
  return sw::tiled::plan_bands(p->w, shape);
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
  p.w.kind = BandKind::ReluGrad, p.name = "relu", p.backward = true;
  if (!g.host_f32()) return false;
  Operand xo;
  const int t = saved_tiled(x, "relu", &xo);
  if (t < 0) {
    result->reset();
    return true;
  }
  if (t == 0) return false;
  sw::ops::GradPlan gp;
  if (engine_call([&] { gp = sw::ops::plan_relu_grad(g.L(), xo.L()); }) < 0) {
    PyErr_Clear();  // the dense path raises it again
    return false;
  }
  if (!backward_plan(&p, g, xo, x, gp, xo.L().shape())) return false;
  run_plan(nullptr, p, "backward", result);
  return true;
}

bool tiled_mul_grad(const Operand& g, PyObject* x, PyObject* other, Ref* result) {
  Plan p;
  p.w.kind = BandKind::MulGrad, p.name = "mul", p.backward = true;
  if (!g.host_f32()) return false;
  Operand oo;
  const int t = saved_tiled(other, "mul", &oo);
  if (t < 0) {
    result->reset();
    return true;
  }
  if (t == 0) return false;
  sw::ops::MulGradPlan gp;
  if (engine_call([&] { gp = sw::ops::plan_mul_grad(g.L(), layout_of(as_tensor(x)->layout), &oo.L()); }) < 0) {
    PyErr_Clear();  // the dense path raises it again
    return false;
  }
  if (gp.reduce) p.w.kind = BandKind::MulGradSum;
  else if (!(layout_of(as_tensor(x)->layout).shape() == g.L().shape())) return false;
  if (!backward_plan(&p, g, oo, x, gp, g.L().shape())) return false;
  if (p.w.kind == BandKind::MulGradSum && !sw::tiled::tile_order_sums(p.w)) return false;
  run_plan(nullptr, p, "backward", result);
  return true;
}

}  // namespace swpy::ops

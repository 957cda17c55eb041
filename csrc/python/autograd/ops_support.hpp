// Shared by the differentiable operations' files (ops_*.cpp): operands,
// results on the two storage paths, and the gradient helpers.
//
// The rules, result layouts and gradient plans are the engine's
// (csrc/engine/autograd/op_rules.hpp); both storage paths follow them.
//
// Storage paths. An operand whose carrier is native host memory (CPU) is
// computed by the engine kernels (csrc/engine/ops/kernels.hpp) straight on the
// carrier's buffer; a Generic operand is computed value by value in Python
// arithmetic and stored through carrier_new_like, which coerces (Float32
// rounds to binary32, Int32 is range checked). Every result is fresh compact
// storage (the compact layout of its shape, offset 0) of the operands'
// exact carrier class; broadcast_to alone is a view on the same carrier.
//
// Gradients follow the layout rule of autograd (sw::gradient_layout): the
// input's own layout when it is injective, else the compact layout of its
// shape, in fresh storage of the cotangent's carrier class. Backward reads
// saved inputs from their carriers when it runs, not from a forward copy.
#pragma once
#include <array>
#include <utility>
#include <vector>

#include "autograd/internal.hpp"
#include "ops/rules.hpp"
#include "ops/kernels.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy::ops {

namespace K = sw::kernels;
using Leaves = K::Leaves;
using sw::DTypeCode;
using autograd::differentiable;
using autograd::dtype_label;

// ------------------------------------------------------------ operands

struct Operand {
  PyObject* tensor = nullptr;   // borrowed (the dense operand once a tiled one is materialized)
  PyObject* carrier = nullptr;  // borrowed
  Py_ssize_t offset = 0;
  const sw::Layout* layout = nullptr;
  DTypeCode dtype = DTypeCode::Any;
  void* host = nullptr;  // slot 0 of native host storage; NULL on the values path
  // The class the arithmetic runs in: the carrier's, or a TiledEvictable's
  // primary class (its dense operand lives there).
  PyTypeObject* cls = nullptr;
  // A full TiledEvictable tensor (ops_tiled.cpp): its carrier (borrowed)
  // and, once materialized, the dense operand that tensor/carrier/host
  // describe (owned).
  PyObject* tiled = nullptr;
  Ref dense;

  const sw::Layout& L() const { return *layout; }
  // Address of the tensor's offset slot in host storage.
  const void* at() const {
    return static_cast<const char*>(host) + static_cast<size_t>(offset) * sw::itemsize(dtype);
  }
  bool host_f32() const { return host && dtype == DTypeCode::Float32; }
};

// A Tensor argument without storage checks (for views). 0 / -1.
int view_operand(PyObject* t, const char* op, Operand* o);
// A computed operand: a live CPU (host) or Generic tensor of a dtype the
// arithmetic supports.
int compute_operand(PyObject* t, const char* op, Operand* o);
// Both operands of a binary operation: one carrier class, one dtype.
int check_pair(const Operand& a, const Operand& b, const char* op);
// The cotangent argument of a native backward, and a saved input read at
// backward time.
int cotangent_operand(PyObject* g, const char* op, Operand* o);
int saved_operand(PyObject* t, const char* op, Operand* o);

// ------------------------------------------------------------ tiled operands (ops_tiled.cpp)
//
// A full TiledEvictable tensor is a direct operand of add, mul, relu and
// reduce_sum: after every operand is validated (the tile-footprint rule
// included), the operation reads the tiles band by band where it can
// (ops_tiled_bands.cpp: tiled_forward, tiled_mul_grad, tiled_relu_grad);
// otherwise every tile is copied into one dense tensor of its primary class
// (blocking; no autograd node) and the operation computes on that. Its node
// saves the tiled tensor itself. Backward reads the values it needs again
// (purpose "backward") and hands the tiled input a fresh TiledEvictable
// gradient whose all-zero tiles stay implicit.

// True when c is a TiledEvictable.
bool is_tiled_carrier(PyObject* c);
// Completes compute_operand for a carrier that is neither host memory nor
// Generic: 1 when it is a TiledEvictable whose tensor passes the
// tile-footprint rule (ValueError otherwise; o->tiled, o->cls set), 0 when
// not tiled, -1 with an exception.
int tiled_operand(const char* op, Operand* o);
// Materializes the tiled operands once the operation has validated
// everything; b may be NULL. 0 / -1.
int ready_operands(Operand* a, Operand* b, const char* op);
// saved_operand for a backward that reads values: a tiled input is
// materialized (purpose "backward").
int saved_values(PyObject* t, const char* op, Operand* o);
// A dense gradient (stolen) for input x: wrapped into a fresh TiledEvictable
// gradient when x is a tiled tensor, else returned as it is. fresh says grad
// is storage the backward just allocated and shares with no one: the
// TiledEvictable gradient then takes it as its primary instead of copying it.
PyObject* input_gradient(PyObject* x, PyObject* grad, const char* op, bool fresh = false);
// The sum of grads (each laid out as the full tensor t of the TiledEvictable
// te: TiledEvictable-backed or dense) as a fresh TiledEvictable gradient,
// tile by tile; NotImplemented when a contribution does not fit.
PyObject* tiled_sum_gradients(PyObject* t, PyObject* te, const std::vector<PyObject*>& grads);

// A request reading every tile of a TiledEvictable for a direct operation
// (purpose "operation" or "backward": the residency policy's plan is asked
// for and its promotions run first; a tile under a pending residency
// request raises RuntimeError).
struct TileReader;
TileReader* tile_reader_open(PyObject* te, const char* purpose);
// For each span (tile k, first slot, count) relative to tile k's first slot
// ("tiles" geometry), the host address of its first slot: a primary tile of
// an exact CPU primary in place, anything else staged into a CPU buffer
// (reused until the next call), an implicit tile a zero tile. 0 / -1.
int tile_reader_read(TileReader* r, const std::vector<std::array<int64_t, 3>>& spans, std::vector<const char*>* out);
// A result the operation computed in CPU, copied into a fresh carrier of the
// primary's class (result is released). New reference.
PyObject* tile_reader_as_primary(TileReader* r, PyObject* result);
// Ends the request (ok: the policy's plan commits) and frees r. 0 / -1.
int tile_reader_close(TileReader* r, bool ok);

// The backward of mul and relu reading a tiled input tile by tile
// (ops_tiled_bands.cpp). False (nothing raised) when that path does not
// apply: the caller materializes the input (saved_values) and computes
// densely. Otherwise true: *result is the dense gradient (fresh storage, as
// mul_grad and the relu kernel would give), or empty with the exception set.
// tiled_mul_grad: x's gradient g * other, other a tiled saved input.
bool tiled_mul_grad(const Operand& g, PyObject* x, PyObject* other, Ref* result);
// tiled_relu_grad: x's gradient g where x > 0, x a tiled saved input.
bool tiled_relu_grad(const Operand& g, PyObject* x, Ref* result);

// Engine work of operation op: errors name "op(): ..." (forward) or
// "op backward: ..." (backward).
template <class F>
int forward_call(const char* op, F&& f) {
  return engine_call_in(op, "(): ", std::forward<F>(f));
}
template <class F>
int backward_call(const char* op, F&& f) {
  return engine_call_in(op, " backward: ", std::forward<F>(f));
}

// Scalar indices of every coordinate of a leaf list, first leaf fastest.
int index_list(const Leaves& l, std::vector<int64_t>& out);

// ------------------------------------------------------------ results

// Fresh host storage of like's exact class with n slots of dtype; *data
// receives slot 0.
PyObject* alloc_host(PyObject* like, Py_ssize_t n, DTypeCode dtype, bool zero, void** data);
// Host path: fresh host storage of like's exact class with slots slots of
// dtype (zeroed when zero), filled by kernel(data) (engine code; errors name
// op as "op(): ..."), as a Tensor at offset 0 in layout l (layout_obj reused
// when given).
template <class Kernel>
PyObject* host_result(const char* op, PyObject* like, int64_t slots, DTypeCode dtype, bool zero, const sw::Layout& l,
                      PyObject* layout_obj, Kernel&& kernel);
// A forward result: a's class and dtype, compact layout out, every slot
// written by the kernel.
template <class Kernel>
PyObject* host_forward(const char* op, const Operand& a, const sw::Layout& out, Kernel&& kernel) {
  return host_result(op, a.carrier, out.size(), a.dtype, false, out, nullptr, std::forward<Kernel>(kernel));
}
// A gradient: Float32 in g's class laid out as the plan says (zero-filled
// as it says), filled by kernel(float* out).
template <class Kernel>
PyObject* host_gradient(const char* op, const Operand& g, const sw::ops::GradPlan& p, PyObject* layout_obj,
                        Kernel&& kernel) {
  return host_result(op, g.carrier, p.slots(), DTypeCode::Float32, p.zero_fill, p.layout, layout_obj,
                     [&](void* out) { kernel(static_cast<float*>(out)); });
}
// Tensor over carrier (stolen) at offset 0 in layout l; layout_obj is used
// when given (borrowed), else a new Layout object is built.
PyObject* wrap(PyObject* carrier, const sw::Layout& l, PyObject* layout_obj);
// Values path: a list of n zeros of dtype.
PyObject* zero_list(DTypeCode dtype, Py_ssize_t n);
// Values path: the value at scalar index idx of operand o.
PyObject* get_slot(const Operand& o, int64_t idx);
// list[slot] = list[slot] + v (v stolen). 0 / -1.
int list_accumulate(PyObject* list, int64_t slot, PyObject* v);
// list[slot] = v (v stolen).
void list_store(PyObject* list, int64_t slot, PyObject* v);
// Backward results: (a, b) or (a,), NULL standing for None (stolen).
PyObject* pair_or_none(PyObject* a, PyObject* b);
PyObject* single(PyObject* a);

template <class Kernel>
PyObject* host_result(const char* op, PyObject* like, int64_t slots, DTypeCode dtype, bool zero, const sw::Layout& l,
                      PyObject* layout_obj, Kernel&& kernel) {
  void* data;
  Ref c = Ref::steal(alloc_host(like, slots, dtype, zero, &data));
  if (!c) return nullptr;
  if (forward_call(op, [&] { kernel(data); }) < 0) return nullptr;
  return wrap(c.release(), l, layout_obj);
}

// ------------------------------------------------------------ gradients

// The saved inputs a backward needs (borrowed), or RuntimeError.
PyObject* saved_inputs(PyObject* self, Py_ssize_t n, const char* op);
// Gradient for x by summing cotangent g onto x's gradient layout (a plain
// relayout when no leaf was broadcast; g itself when it already has it).
PyObject* reduce_to(const Operand& g, PyObject* xt, const char* op);
// The Layout object for gradient layout gl of tensor x: x's own object when
// gl is x's layout (identity kept), else NULL (a fresh one is built).
PyObject* grad_layout_object(PyObject* x, const sw::Layout& gl);

// ------------------------------------------------------------ operation types

// MulOperation's and AddOperation's object.
struct MulOperationObject {
  OperationObject base;
  PyObject* scalar;  // the Python number of op(t, number); NULL for op(a, b)
};
extern PyTypeObject BroadcastToOperation_Type;
extern PyTypeObject SliceOperation_Type;
extern PyTypeObject AddOperation_Type;
extern PyTypeObject MulOperation_Type;
extern PyTypeObject ReluOperation_Type;
extern PyTypeObject ReduceSumOperation_Type;

// Method tables of the operation types (ops_binary.cpp, ops_unary.cpp).
extern PyMethodDef BroadcastTo_methods[];
extern PyMethodDef Add_methods[];
extern PyMethodDef Mul_methods[];
extern PyMethodDef Relu_methods[];
extern PyMethodDef ReduceSum_methods[];
// MulOperation's GC slots (it owns the scalar).
int Mul_traverse(PyObject* self, visitproc visit, void* arg);
int Mul_clear(PyObject* self);
void Mul_dealloc(PyObject* self);

// A NumPy integer (kind 'i') or floating (kind 'f') scalar, found by its
// class names without importing NumPy; 0 for anything else.
char numpy_scalar_kind(PyObject* v);
// The number operand of mul and add: a Python int or float (not bool), or
// a NumPy integer or floating scalar.
inline bool is_scalar(PyObject* v) {
  if (PyFloat_Check(v)) return true;
  if (PyLong_Check(v)) return !PyBool_Check(v);
  return numpy_scalar_kind(v) != 0;
}
// An integer number operand (Python int, not bool, or a NumPy integer).
inline bool is_int_scalar(PyObject* v) {
  if (PyLong_Check(v)) return !PyBool_Check(v);
  return !PyFloat_Check(v) && numpy_scalar_kind(v) == 'i';
}

}  // namespace swpy::ops

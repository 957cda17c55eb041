// The MoveOperation type family: the open base (forward, backward, the
// abstract _copy hook), ElementwiseMoveOperation and the registered bulk
// CPU <-> FileBacked operations with their built-in _copy methods.
#include "move/internal.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "util/args.hpp"
#include "util/type_object.hpp"
#include "movement/copy_access.hpp"

namespace swpy {

PyTypeObject MoveOperation_Type = static_type("strideweave.MoveOperation", sizeof(MoveOperationObject));
PyTypeObject ElementwiseMoveOperation_Type = static_type("strideweave.ElementwiseMoveOperation", sizeof(MoveOperationObject));
PyTypeObject CpuToFileBackedMoveOperation_Type = static_type("strideweave.CpuToFileBackedMoveOperation", sizeof(MoveOperationObject));
PyTypeObject FileBackedToCpuMoveOperation_Type = static_type("strideweave.FileBackedToCpuMoveOperation", sizeof(MoveOperationObject));

namespace move_internal {

namespace {

int MoveOp_traverse(PyObject* self, visitproc visit, void* arg) {
  MoveOperationObject* m = as_move_op(self);
  Py_VISIT(m->reverse_op);
  Py_VISIT(m->source_carrier);
  Py_VISIT(m->dest_carrier);
  Py_VISIT(m->source_layout);
  return Operation_Type.tp_traverse(self, visit, arg);
}

int MoveOp_clear(PyObject* self) {
  MoveOperationObject* m = as_move_op(self);
  Py_CLEAR(m->reverse_op);
  Py_CLEAR(m->source_carrier);
  Py_CLEAR(m->dest_carrier);
  Py_CLEAR(m->source_layout);
  return Operation_Type.tp_clear(self);
}

void MoveOp_dealloc(PyObject* self) {
  MoveOperationObject* m = as_move_op(self);
  // Untrack before clearing: a field's finalizer may run the collector,
  // which must not see this dying object (it would free it a second time).
  PyObject_GC_UnTrack(self);
  Py_CLEAR(m->reverse_op);
  Py_CLEAR(m->source_carrier);
  Py_CLEAR(m->dest_carrier);
  Py_CLEAR(m->source_layout);
  Operation_Type.tp_dealloc(self);
}

PyObject* MoveOp_copy_abstract(PyObject* self, PyObject*) {
  PyErr_Format(PyExc_NotImplementedError,
               "%s does not implement _copy(tensor, destination, output, element_count)", type_name(self));
  return nullptr;
}

// The arguments of the built-in _copy implementations.
struct CopyArgs {
  PyObject* tensor;
  PyObject* dest;
  PyObject* output;
  Py_ssize_t count;
};

int parse_copy_args(PyObject* args, CopyArgs* a) {
  if (!PyArg_ParseTuple(args, "OOOO&:_copy", &a->tensor, &a->dest, &a->output, count_arg, &a->count)) return -1;
  if (!is_tensor(a->tensor) || !is_tensor(a->output)) {
    PyErr_SetString(PyExc_TypeError, "_copy() tensor and output must be Tensors");
    return -1;
  }
  if (!is_carrier(a->dest) || as_tensor(a->output)->carrier != a->dest) {
    PyErr_SetString(PyExc_TypeError, "_copy() destination must be the Carrier output is bound to");
    return -1;
  }
  if (tensor_reject_multi(a->tensor, "move") < 0) return -1;
  if (move_check_dtype(a->tensor, a->dest) < 0) return -1;
  const sw::Layout& sl = layout_of(as_tensor(a->tensor)->layout);
  const sw::Layout& dl = layout_of(as_tensor(a->output)->layout);
  if (!(sl.shape() == dl.shape())) {
    PyErr_SetString(PyExc_ValueError, "_copy() output must have the tensor's shape");
    return -1;
  }
  return 0;
}

// The claims of a directly called built-in _copy, as
// sw::movement::copy_access decides them for each participant.
class CopyClaims {
 public:
  CopyClaims() = default;
  CopyClaims(const CopyClaims&) = delete;
  CopyClaims& operator=(const CopyClaims&) = delete;
  ~CopyClaims() {
    ErrorGuard keep;
    for (auto& c : claims_)
      if (c.token && carrier_relinquish(c.carrier, c.token) < 0) PyErr_Clear();
  }

  // 0, or -1 with RuntimeError set.
  int take(PyObject* src, PyObject* dst) {
    if (take_one(src, false) < 0) return -1;
    return dst == src ? 0 : take_one(dst, true);
  }
  // Whether the copy may run with the GIL released.
  bool unlocked() const { return unlocked_; }

 private:
  struct Claim {
    PyObject* carrier = nullptr;
    int64_t token = 0;
  };
  int take_one(PyObject* c, bool written) {
    sw::movement::CopyAccess access = sw::movement::CopyAccess::Locked;
    if (engine_call([&] {
          access = sw::movement::copy_access(as_carrier(c)->ownership, running_move_token(c), written,
                                             current_thread_id(), type_name(c));
        }) < 0)
      return -1;
    if (access == sw::movement::CopyAccess::Locked) unlocked_ = false;
    if (access != sw::movement::CopyAccess::Claim) return 0;
    const int64_t t = carrier_claim(c);
    if (!t) return -1;
    claims_[n_++] = Claim{c, t};
    return 0;
  }
  Claim claims_[2];
  int n_ = 0;
  bool unlocked_ = true;
};

// Runs a native plan between src and dst as a directly called built-in
// _copy must (see CopyClaims). 0 / -1.
int run_claimed(PyObject* src, PyObject* dst, const sw::CopyPlan& plan) {
  CopyClaims claims;
  if (claims.take(src, dst) < 0) return -1;
  return claims.unlocked() ? run_plan_unlocked(plan) : run_plan_locked(plan);
}

// Built-in _copy of ElementwiseMoveOperation: a native strided copy of the
// logical elements when both carriers are native, else value by value
// through the carriers (slots the layout does not address are untouched).
PyObject* Elementwise_copy(PyObject*, PyObject* args) {
  CopyArgs a;
  if (parse_copy_args(args, &a) < 0) return nullptr;
  TensorObject* s = as_tensor(a.tensor);
  TensorObject* o = as_tensor(a.output);
  const sw::Layout& sl = layout_of(s->layout);
  const sw::Layout& dl = layout_of(o->layout);
  const sw::CopyPlan plan = plan_logical(s->carrier, s->offset, sl, a.dest, o->offset, dl);
  const int rc =
      plan.native() ? run_claimed(s->carrier, a.dest, plan) : copy_values(s->carrier, s->offset, sl, a.dest, o->offset, dl);
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}

// Built-in _copy of the CPU <-> FileBacked operations: the whole physical
// span [offset, offset + element_count) in one bulk copy.
PyObject* Bulk_copy(PyObject* self, PyObject* args) {
  CopyArgs a;
  if (parse_copy_args(args, &a) < 0) return nullptr;
  TensorObject* s = as_tensor(a.tensor);
  TensorObject* o = as_tensor(a.output);
  const Py_ssize_t ssize = carrier_size(s->carrier), dsize = carrier_size(a.dest);
  if (ssize < 0 || dsize < 0) return nullptr;
  if (a.count < 0 || s->offset + a.count > ssize || o->offset + a.count > dsize) {
    PyErr_SetString(PyExc_ValueError, "_copy() element_count exceeds a carrier");
    return nullptr;
  }
  const sw::CopyPlan plan = plan_span(s->carrier, s->offset, a.dest, o->offset, a.count);
  if (!plan.native()) {
    PyErr_Format(PyExc_TypeError, "%s copies between native CPU and FileBacked carriers of one dtype only",
                 type_name(self));
    return nullptr;
  }
  if (run_claimed(s->carrier, a.dest, plan) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* MoveOp_forward(PyObject* self, PyObject* args) {
  PyObject *tensor, *dest;
  if (!PyArg_ParseTuple(args, "OO:forward", &tensor, &dest)) return nullptr;
  PyObject* h = move_async_impl(tensor, dest, self, nullptr);
  if (!h) return nullptr;
  return wait_handle(h);
}

// Runs plan reading from source, a carrier no move owns (the caller's
// cotangent). It is claimed for the copy so no other thread can write or
// release it while the GIL is released; one that is already owned (say an
// Evictable tier) is copied with the GIL held instead. 0 / -1.
int run_plan_reading(PyObject* source, const sw::CopyPlan& plan) {
  const int64_t token = carrier_claim(source);
  if (!token) {
    PyErr_Clear();
    return run_plan_locked(plan);
  }
  const int rc = run_plan_unlocked(plan);
  ErrorGuard keep;
  if (carrier_relinquish(source, token) < 0) PyErr_Clear();
  return rc;
}

// Copies the cotangent's logical values into stage under layout l.
int stage_cotangent(PyObject* g, PyObject* stage, const sw::Layout& l) {
  TensorObject* gt = as_tensor(g);
  const sw::Layout& gl = layout_of(gt->layout);
  const sw::CopyPlan plan = plan_logical(gt->carrier, gt->offset, gl, stage, 0, l);
  if (plan.native()) return run_plan_reading(gt->carrier, plan);
  return copy_values(gt->carrier, gt->offset, gl, stage, 0, l);
}

// The checks of backward(g) before anything is allocated. 0 / -1.
int check_backward(PyObject* self, PyObject* g) {
  MoveOperationObject* m = as_move_op(self);
  if (!is_tensor(g)) {
    PyErr_Format(PyExc_TypeError, "%s.backward() expects a Tensor cotangent, not %.100s", type_name(self),
                 type_name(g));
    return -1;
  }
  if (tensor_reject_multi(g, "backward") < 0) return -1;
  if (carrier_is_released(as_tensor(g)->carrier)) {
    PyErr_Format(PyExc_RuntimeError, "the cotangent's %s carrier is released", type_name(as_tensor(g)->carrier));
    return -1;
  }
  if (!m->reverse_op || !m->source_carrier || !m->source_layout || !m->dest_carrier) {
    PyErr_Format(PyExc_RuntimeError, "this %s has not recorded a differentiable move", type_name(self));
    return -1;
  }
  const sw::Layout& src_l = layout_of(m->source_layout);
  const sw::Layout& gl = layout_of(as_tensor(g)->layout);
  if (!(gl.shape() == src_l.shape())) {
    PyObject* gs = reinterpret_cast<LayoutObject*>(as_tensor(g)->layout)->shape;
    PyObject* ss = reinterpret_cast<LayoutObject*>(m->source_layout)->shape;
    PyErr_Format(PyExc_ValueError, "cotangent shape %R does not match the moved tensor's shape %R", gs, ss);
    return -1;
  }
  if (!gl.is_injective()) {
    PyErr_SetString(PyExc_ValueError,
                    "move backward requires an injective gradient Layout; the cotangent's layout maps several "
                    "coordinates to one slot");
    return -1;
  }
  return 0;
}

// backward(gradient): one cotangent for the move's result; returns a one-
// element tuple holding a detached gradient in fresh storage of the source
// carrier's exact class, moved there through the captured reverse route.
PyObject* MoveOp_backward(PyObject* self, PyObject* g) {
  if (check_backward(self, g) < 0) return nullptr;
  MoveOperationObject* m = as_move_op(self);
  const sw::Layout& src_l = layout_of(m->source_layout);
  Ref layout_obj = src_l.is_injective() ? Ref::borrow(m->source_layout)
                                        : Ref::steal(layout_from_engine(grad_layout_for(src_l)));
  if (!layout_obj) return nullptr;
  const sw::Layout& l = layout_of(layout_obj.get());
  const Py_ssize_t n = static_cast<Py_ssize_t>(l.cosize());
  Ref stage, staged, target, grad;
  // Declared after the references: grad mode comes back before they drop.
  NoGrad no_grad;
  // Stage the values in fresh storage of the forward destination's class,
  // so the captured reverse route moves (and releases) only our copy, never
  // the caller's cotangent.
  stage.reset(carrier_allocate_like(m->dest_carrier, n, true, nullptr, true));
  if (!stage || stage_cotangent(g, stage.get(), l) < 0) return nullptr;
  staged.reset(tensor_new(stage.get(), 0, layout_obj.get()));
  if (!staged) return nullptr;
  target.reset(carrier_allocate_like(m->source_carrier, n, true, nullptr, true));
  if (!target) return nullptr;
  PyObject* h = move_async_impl(staged.get(), target.get(), nullptr, m->reverse_op);
  if (!h) return nullptr;
  grad.reset(wait_handle(h));
  if (!grad) return nullptr;
  return PyTuple_Pack(1, grad.get());
}

PyMethodDef MoveOp_methods[] = {
    {"_copy", MoveOp_copy_abstract, METH_VARARGS,
     "_copy(tensor, destination, output, element_count) -> None: subclass hook performing one transfer. It runs "
     "on a worker thread holding the GIL, with grad mode off and owner access to both carriers; element_count is "
     "the layout's cosize."},
    {"forward", MoveOp_forward, METH_VARARGS,
     "forward(tensor, destination): perform one blocking move with this operation (pins checked)."},
    {"backward", MoveOp_backward, METH_O,
     "backward(gradient): a fresh gradient in the source carrier's exact class, through the captured reverse "
     "route; returns a one-element tuple."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef Elementwise_methods[] = {
    {"_copy", Elementwise_copy, METH_VARARGS,
     "Copy the logical elements (native strided copy for native carriers, value by value otherwise)."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef Bulk_methods[] = {
    {"_copy", Bulk_copy, METH_VARARGS, "Bulk copy of the whole physical span [offset, offset + element_count)."},
    {nullptr, nullptr, 0, nullptr}};

int set_pins(PyTypeObject* op, PyTypeObject* src, PyTypeObject* dst) {
  if (PyDict_SetItemString(op->tp_dict, "source_class", src ? reinterpret_cast<PyObject*>(src) : Py_None) < 0 ||
      PyDict_SetItemString(op->tp_dict, "destination_class", dst ? reinterpret_cast<PyObject*>(dst) : Py_None) < 0)
    return -1;
  PyType_Modified(op);
  return 0;
}

PyObject* copy_descr(PyTypeObject* t) { return PyDict_GetItemString(t->tp_dict, "_copy"); }

void init_op_type(PyTypeObject* t, PyTypeObject* base, const char* doc, PyMethodDef* methods) {
  t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  t->tp_doc = doc;
  t->tp_base = base;
  t->tp_methods = methods;
  t->tp_traverse = MoveOp_traverse;
  t->tp_clear = MoveOp_clear;
  t->tp_dealloc = MoveOp_dealloc;
}

}  // namespace

int operations_init(PyObject* module) {
  init_op_type(&MoveOperation_Type, &Operation_Type,
               "Open base of move operations and of the autograd node a differentiable move records. Subclasses "
               "implement _copy(tensor, destination, output, element_count) and may pin source_class / "
               "destination_class to exact carrier classes.",
               MoveOp_methods);
  init_op_type(&ElementwiseMoveOperation_Type, &MoveOperation_Type,
               "The fallback move: copies logical values (natively for native carriers); holes keep their values.",
               Elementwise_methods);
  init_op_type(&CpuToFileBackedMoveOperation_Type, &MoveOperation_Type,
               "Registered bulk move from CPU to FileBacked: writes the whole physical span.", Bulk_methods);
  init_op_type(&FileBackedToCpuMoveOperation_Type, &MoveOperation_Type,
               "Registered bulk move from FileBacked to CPU: reads the whole physical span.", Bulk_methods);
  if (add_type(module, &MoveOperation_Type, "MoveOperation") < 0 ||
      add_type(module, &ElementwiseMoveOperation_Type, "ElementwiseMoveOperation") < 0 ||
      add_type(module, &CpuToFileBackedMoveOperation_Type, "CpuToFileBackedMoveOperation") < 0 ||
      add_type(module, &FileBackedToCpuMoveOperation_Type, "FileBackedToCpuMoveOperation") < 0)
    return -1;
  if (set_pins(&MoveOperation_Type, nullptr, nullptr) < 0 ||
      set_pins(&CpuToFileBackedMoveOperation_Type, &CPU_Type, &FileBacked_Type) < 0 ||
      set_pins(&FileBackedToCpuMoveOperation_Type, &FileBacked_Type, &CPU_Type) < 0)
    return -1;
  state.copy_name = PyUnicode_InternFromString("_copy");
  if (!state.copy_name) return -1;
  state.elementwise_copy = copy_descr(&ElementwiseMoveOperation_Type);
  state.bulk_copy_c2f = copy_descr(&CpuToFileBackedMoveOperation_Type);
  state.bulk_copy_f2c = copy_descr(&FileBackedToCpuMoveOperation_Type);
  if (!state.elementwise_copy || !state.bulk_copy_c2f || !state.bulk_copy_f2c) {
    PyErr_SetString(PyExc_SystemError, "move operation types lack _copy");
    return -1;
  }
  return 0;
}

}  // namespace move_internal

}  // namespace swpy

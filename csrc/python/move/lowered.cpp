// move_lowered: framework-owned transfers (Evictable residency; see
// move/move.hpp). The same route resolution, pin check, destination growth
// and copy planning as move_async, run synchronously on this thread,
// without ownership checks or claims, autograd node, profiling events or
// source release.
#include "move/internal.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"

namespace swpy {

namespace move_internal {

namespace {

// Grows an empty destination to the job's count; a non-empty one that is
// too small is refused. 0 / -1.
int fit_destination(MoveJob* j) {
  const Py_ssize_t dsize = carrier_size(j->dest.get());
  if (dsize < 0) return -1;
  if (dsize >= j->count) return 0;
  const int r = dsize == 0 ? carrier_reserve(j->dest.get(), j->count) : 0;
  if (r < 0) return -1;
  if (r == 0) {
    PyErr_Format(PyExc_ValueError, "destination %s carrier is too small: %zd slots for a layout cosize of %zd",
                 type_name(j->dest.get()), dsize, j->count);
    return -1;
  }
  return 0;
}

// The transfer itself, with grad mode off. New reference to the output.
PyObject* run_lowered(MoveJob* j, PyObject* cls) {
  NoGrad no_grad;
  if (fit_destination(j) < 0) return nullptr;
  j->output.reset(tensor_new(j->dest.get(), 0, as_tensor(j->tensor.get())->layout));
  if (!j->output) return nullptr;
  j->op.reset(PyObject_CallNoArgs(cls));
  if (!j->op) return nullptr;
  if (!PyObject_TypeCheck(j->op.get(), &MoveOperation_Type)) {
    PyErr_Format(PyExc_TypeError, "%s() did not create a MoveOperation", class_name(cls));
    return nullptr;
  }
  as_move_op(j->op.get())->used = true;
  if (plan_copy(j) < 0) return nullptr;
  const int rc = j->kind == CopyKind::Native ? run_plan_unlocked(j->plan) : run_python_copy(j);
  return rc == 0 ? j->output.new_ref() : nullptr;
}

}  // namespace

}  // namespace move_internal

PyObject* move_lowered(PyObject* tensor, PyObject* destination, int64_t src_token, int64_t dst_token) {
  using namespace move_internal;
  if (!is_tensor(tensor) || !is_carrier(destination)) {
    PyErr_SetString(PyExc_TypeError, "move_lowered() needs a Tensor and a Carrier");
    return nullptr;
  }
  if (tensor_reject_multi(tensor, "move") < 0) return nullptr;
  PyObject* src = as_tensor(tensor)->carrier;
  if (src == destination) {
    PyErr_SetString(PyExc_ValueError, "move_lowered() destination is the tensor's own carrier");
    return nullptr;
  }
  Ref cls = Ref::steal(move_resolve_route(Py_TYPE(src), Py_TYPE(destination)));
  if (!cls || check_pins(cls.get(), Py_TYPE(src), Py_TYPE(destination)) < 0) return nullptr;
  MoveJob j;
  j.tensor = Ref::borrow(tensor);
  j.source = Ref::borrow(src);
  j.dest = Ref::borrow(destination);
  j.src_token = src_token;
  j.dst_token = dst_token;
  j.count = static_cast<Py_ssize_t>(layout_of(as_tensor(tensor)->layout).cosize());
  j.src_version = as_carrier(src)->version;
  j.dst_version = as_carrier(destination)->version;
  PyObject* result = run_lowered(&j, cls.get());
  restore_versions(&j);           // a transfer is not a value write
  j.src_token = j.dst_token = 0;  // the caller's tokens: nothing to give back
  j.drop_refs();
  return result;
}

}  // namespace swpy

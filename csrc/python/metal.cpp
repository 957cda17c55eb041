// Metal: Apple GPU storage of Float32, Int32 or Bool slots, and its three
// registered exact-pair bulk move operations (CPU->Metal, Metal->CPU,
// Metal->Metal).
//
// Device storage and every step sequence around it (allocation, slot
// reads and writes, span copies, release) live in the engine
// (metal_buffer.hpp, over metal_runtime.hpp); this file parses, runs those
// steps with the GIL released and wraps the results. No runtime exists in a
// Linux build, so construction raises RuntimeError("Metal requires macOS
// ..."), while the class, its operations, their registry entries and the
// DLPack refusal (no dlpack_info hook: the base's BufferError) exist
// everywhere. Tests install a fake runtime from the separate
// strideweave._testing extension, through the private capsule
// _core._metal_test_hooks (metal_test_hooks.hpp).
//
// A failed step raises RuntimeError before anything is published, so a move
// leaves its source live and unchanged.
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "metal/buffer.hpp"
#include "metal_test_hooks.hpp"
#include "dtype_object.hpp"
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

namespace swpy {

namespace {

namespace M = sw::metal;

struct MetalObject {
  CarrierObject base;
  M::Buffer buffer;     // keeps the runtime that owns it (set once constructed)
  sw::DTypeCode dtype;  // kept after release
};

MetalObject* as_metal(PyObject* o) { return reinterpret_cast<MetalObject*>(o); }
MetalObject* as_metal(CarrierObject* o) { return reinterpret_cast<MetalObject*>(o); }
bool is_metal(PyObject* o) { return PyObject_TypeCheck(o, &Metal_Type); }

const char kNoRuntime[] =
    "Metal requires macOS with a Metal runtime; none is available in this process";

int item_of(sw::DTypeCode c) { return sw::codec::slot_bytes(c); }

std::shared_ptr<M::Runtime> require_runtime() {
  auto rt = M::current_runtime();
  if (!rt) PyErr_SetString(PyExc_RuntimeError, kNoRuntime);
  return rt;
}

// A device step's failure names its step ("Metal <step> failed: ..."): the
// house translation (raise_engine_exception) plus Metal's one exception.
int raise_device_error(std::exception_ptr err) {
  try {
    std::rethrow_exception(err);
  } catch (const M::StepError& e) {
    PyErr_Format(PyExc_RuntimeError, "Metal %s failed: %s", e.step(), e.what());
    return -1;
  } catch (...) {
    return raise_engine_exception();
  }
}

// Runs engine device steps, with the GIL released unless told otherwise (a
// synchronization may block for as long as the device works). 0 / -1 with
// RuntimeError ("Metal <step> failed: ...") or the translated engine error.
template <class F>
int device(F&& f, bool release_gil = true) {
  std::exception_ptr err;
  {
    std::optional<GilRelease> nogil;
    if (release_gil) nogil.emplace();
    err = engine_capture(f);  // translated once the GIL is back
  }
  return err ? raise_device_error(err) : 0;
}

// Allocates storage for n slots into a fresh (empty) Metal object.
int metal_storage(MetalObject* o, std::shared_ptr<M::Runtime> rt, Py_ssize_t n, sw::DTypeCode dtype,
                  bool mutable_, bool zero) {
  M::Buffer fresh;
  if (device([&] { fresh = M::Buffer::allocate(std::move(rt), n, item_of(dtype), zero); }) < 0) return -1;
  o->buffer = std::move(fresh);
  o->dtype = dtype;
  o->base.constructed_mutable = mutable_;
  return 0;
}

// A fresh instance of type (the receiver's exact class for new_like /
// allocate_like) on the current runtime. Python __init__ is not run.
PyObject* metal_make(PyTypeObject* type, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool zero) {
  auto rt = require_runtime();
  if (!rt) return nullptr;
  Ref args = Ref::steal(PyTuple_New(0));
  if (!args) return nullptr;
  Ref self = Ref::steal(type->tp_new(type, args.get(), nullptr));
  if (!self) return nullptr;
  if (!is_metal(self.get())) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return a Metal carrier", type_name(type));
    return nullptr;
  }
  if (metal_storage(as_metal(self.get()), std::move(rt), n, dtype, mutable_, zero) < 0) return nullptr;
  return self.release();
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return as_metal(o)->dtype; }
Py_ssize_t vt_size(CarrierObject* o) { return as_metal(o)->buffer.size(); }

// A host read: copy the slot back and synchronize before decoding it.
PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  MetalObject* o = as_metal(c);
  const M::BufferView view = o->buffer.view();  // a snapshot: the GIL is released
  unsigned char bytes[sw::codec::kMaxSlotBytes] = {};
  if (device([&] { M::read_slot(view, i, bytes); }) < 0) return nullptr;
  return decode_slot(o->dtype, bytes);
}

// A slot write is enqueued (the runtime stages the bytes) and not waited for.
int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  MetalObject* o = as_metal(c);
  unsigned char bytes[sw::codec::kMaxSlotBytes] = {};
  if (encode_slot(o->dtype, v, bytes) < 0) return -1;
  // Conversion may run Python code (__float__, __index__) that released us.
  if (o->base.released || !o->buffer.runtime() || i >= o->buffer.size()) {
    PyErr_SetString(PyExc_RuntimeError, "Metal carrier changed during the write");
    return -1;
  }
  return device([&] { M::write_slot(o->buffer.view(), i, bytes); }, false);
}

void vt_release(CarrierObject* c) {
  MetalObject* o = as_metal(c);
  // Detach first: other threads see an empty, released carrier while this
  // one waits (a move's commit has already given its ownership back, so
  // without the flag another move could claim the source meanwhile).
  o->base.released = true;
  M::Buffer detached = std::move(o->buffer);
  GilRelease nogil;
  detached.free();
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  sw::DTypeCode code = as_metal(c)->dtype;  // kept after release
  if (dtype && carrier_parse_dtype(sw::CarrierKind::Metal, dtype, &code) < 0) return nullptr;
  std::vector<unsigned char> staged;
  const Py_ssize_t n = carrier_encode_values(values, code, &staged);
  if (n < 0) return nullptr;
  Ref r = Ref::steal(metal_make(Py_TYPE(c), n, code, mutable_, false));
  if (!r) return nullptr;
  const M::BufferView view = as_metal(r.get())->buffer.view();
  if (device([&] { M::write_slots(view, staged.data(), n); }) < 0) return nullptr;
  return r.release();
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  sw::DTypeCode code = as_metal(c)->dtype;
  if (dtype && carrier_parse_dtype(sw::CarrierKind::Metal, dtype, &code) < 0) return nullptr;
  return metal_make(Py_TYPE(c), n, code, mutable_, !empty);
}

// An empty Metal carrier grows once, to exactly the requested span: a move
// destination gets fresh device storage of layout.cosize.
int vt_reserve(CarrierObject* c, Py_ssize_t n) {
  MetalObject* o = as_metal(c);
  const Py_ssize_t size = o->buffer.size();
  if (size != 0 || n == 0) return size >= n ? 1 : 0;
  auto rt = o->buffer.runtime() ? o->buffer.runtime() : require_runtime();
  if (!rt) return -1;
  const bool mutable_ = o->base.constructed_mutable;
  if (metal_storage(o, std::move(rt), n, o->dtype, mutable_, true) < 0) return -1;
  return 1;
}

const CarrierVTable metal_vt = {
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
    vt_reserve, nullptr /* host_data: device memory */, nullptr /* dlpack_info: no export */,
};

// ------------------------------------------------------------ Python type

PyObject* Metal_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &metal_vt);
  if (!self) return nullptr;
  MetalObject* o = as_metal(self);
  new (&o->buffer) M::Buffer();
  o->dtype = sw::DTypeCode::Float32;
  return self;
}

int Metal_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"size", "dtype", "mutable", "empty", nullptr};
  Py_ssize_t n;
  PyObject* dtype = dtype_singleton(sw::DTypeCode::Float32);
  int mutable_ = 1, empty = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|$Opp:Metal", const_cast<char**>(kw), metal_size_arg, &n, &dtype, &mutable_,
                                   &empty))
    return -1;
  MetalObject* o = as_metal(self);
  if (o->buffer.runtime() || o->base.released) {
    PyErr_SetString(PyExc_RuntimeError, "Metal.__init__() cannot be called twice");
    return -1;
  }
  // The arguments are checked first, as every other carrier checks them, so
  // a bad call reads the same on every platform; only a valid one learns
  // that there is no runtime (every Linux machine).
  sw::DTypeCode code;
  if (carrier_parse_dtype(sw::CarrierKind::Metal, dtype, &code) < 0) return -1;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "Metal size must be non-negative");
    return -1;
  }
  auto rt = require_runtime();
  if (!rt) return -1;
  return metal_storage(o, std::move(rt), n, code, mutable_ != 0, empty == 0);
}

void Metal_dealloc(PyObject* self) {
  MetalObject* o = as_metal(self);
  // Dealloc may run at exit: keep the GIL rather than hand it over.
  o->buffer.~Buffer();
  carrier_dealloc(self);
}

// ------------------------------------------------------------ move operations

// The built-in _copy of the three Metal operations: one bulk copy of the
// whole physical span [offset, offset + element_count) (holes included),
// then synchronization, so the move commits (and releases its source) only
// after the device finished. The direction follows the carriers.
PyObject* MetalOp_copy(PyObject* self, PyObject* args) {
  PyObject *tensor, *dest, *output;
  Py_ssize_t count;
  if (!PyArg_ParseTuple(args, "OOOO&:_copy", &tensor, &dest, &output, count_arg, &count)) return nullptr;
  if (!is_tensor(tensor) || !is_tensor(output)) {
    PyErr_SetString(PyExc_TypeError, "_copy() tensor and output must be Tensors");
    return nullptr;
  }
  if (!is_carrier(dest) || as_tensor(output)->carrier != dest) {
    PyErr_SetString(PyExc_TypeError, "_copy() destination must be the Carrier output is bound to");
    return nullptr;
  }
  if (tensor_reject_multi(tensor, "move") < 0 || move_check_dtype(tensor, dest) < 0) return nullptr;
  TensorObject* s = as_tensor(tensor);
  TensorObject* out = as_tensor(output);
  PyObject* src = s->carrier;
  if (!(layout_of(s->layout) == layout_of(out->layout))) {
    PyErr_Format(PyExc_ValueError, "%s copies the physical span, so output must keep the tensor's Layout",
                 type_name(self));
    return nullptr;
  }
  if (carrier_is_released(src) || carrier_is_released(dest)) {
    PyErr_SetString(PyExc_RuntimeError, "_copy() carrier is released");
    return nullptr;
  }
  const bool sm = is_metal(src), dm = is_metal(dest);
  PyObject* host = sm ? (dm ? nullptr : dest) : src;
  void* host_data = host ? carrier_host_data(host) : nullptr;
  if ((!sm && !dm) || (host && !host_data)) {
    PyErr_Format(PyExc_TypeError, "%s copies between Metal carriers and native host (CPU) carriers only",
                 type_name(self));
    return nullptr;
  }
  Ref sd = Ref::steal(carrier_dtype(src));
  if (!sd) return nullptr;
  Ref dd = Ref::steal(carrier_dtype(dest));
  if (!dd) return nullptr;
  const sw::DTypeCode code = dtype_code(sd.get());
  if (code != dtype_code(dd.get()) || !sw::supports_dtype(sw::CarrierKind::Metal, code)) {
    PyErr_Format(PyExc_TypeError, "%s needs one Metal dtype (Float32, Int32 or Bool) on both carriers", type_name(self));
    return nullptr;
  }
  const Py_ssize_t ssize = carrier_size(src), dsize = carrier_size(dest);
  if (ssize < 0 || dsize < 0) return nullptr;
  // Both carriers are owned by the move for its duration, so the host
  // memory and buffers stay valid while the GIL is released.
  const M::BufferView sv = sm ? as_metal(src)->buffer.view() : M::BufferView{};
  const M::BufferView dv = dm ? as_metal(dest)->buffer.view() : M::BufferView{};
  const M::SpanEnd from =
      sm ? M::SpanEnd::on_device(sv, ssize, s->offset) : M::SpanEnd::on_host(host_data, ssize, s->offset);
  const M::SpanEnd to =
      dm ? M::SpanEnd::on_device(dv, dsize, out->offset) : M::SpanEnd::on_host(host_data, dsize, out->offset);
  if (device([&] { M::copy_span(from, to, count, item_of(code)); }) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef MetalOp_methods[] = {
    {"_copy", MetalOp_copy, METH_VARARGS,
     "Bulk copy of the whole physical span [offset, offset + element_count) through the Metal runtime, "
     "synchronized before it returns."},
    {nullptr, nullptr, 0, nullptr}};

// ------------------------------------------------------------ test hooks

// The private hook strideweave._testing uses to install its fake runtime;
// _core itself holds no fake (see metal_test_hooks.hpp).
void hook_install_runtime(std::shared_ptr<M::Runtime> rt) { M::install_runtime(std::move(rt)); }

int hook_buffer_id(PyObject* obj, M::BufferId* out) {
  if (!is_metal(obj)) {
    PyErr_Format(PyExc_TypeError, "buffer_id() expects a Metal carrier, not %.100s", type_name(obj));
    return -1;
  }
  *out = as_metal(obj)->buffer.id();
  return 0;
}

const MetalTestHooks metal_test_hooks = {
    kMetalTestHooksVersion,
    hook_install_runtime,
    hook_buffer_id,
};

int init_op(PyTypeObject* t, const char* doc, PyTypeObject* src, PyTypeObject* dst) {
  // GC support, traverse/clear and dealloc come from MoveOperation.
  t->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t->tp_doc = doc;
  t->tp_base = &MoveOperation_Type;
  t->tp_methods = MetalOp_methods;
  if (PyType_Ready(t) < 0) return -1;
  if (PyDict_SetItemString(t->tp_dict, "source_class", reinterpret_cast<PyObject*>(src)) < 0 ||
      PyDict_SetItemString(t->tp_dict, "destination_class", reinterpret_cast<PyObject*>(dst)) < 0)
    return -1;
  PyType_Modified(t);
  return 0;
}

}  // namespace

PyTypeObject Metal_Type = static_type("strideweave.Metal", sizeof(MetalObject));
// The operation types are reached through the module and the registry only.
static PyTypeObject CpuToMetalMoveOperation_Type = static_type("strideweave.CpuToMetalMoveOperation", sizeof(MoveOperationObject));
static PyTypeObject MetalToCpuMoveOperation_Type = static_type("strideweave.MetalToCpuMoveOperation", sizeof(MoveOperationObject));
static PyTypeObject MetalToMetalMoveOperation_Type = static_type("strideweave.MetalToMetalMoveOperation", sizeof(MoveOperationObject));

int metal_module_init(PyObject* module) {
  Metal_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  Metal_Type.tp_doc =
      "Metal(size, *, dtype=DType.Float32, mutable=True, empty=False)\n\n"
      "Apple GPU storage of Float32, Int32 or Bool slots, zero-filled unless empty. Construction needs a Metal "
      "runtime (macOS); without one it raises RuntimeError('Metal requires macOS ...'). Slot writes are enqueued "
      "on the device; slot reads, bulk moves and release synchronize first. Metal(0) is an empty move destination "
      "that allocates exactly the moved layout's cosize. No DLPack export (BufferError). Registered moves: "
      "CpuToMetalMoveOperation, MetalToCpuMoveOperation, MetalToMetalMoveOperation (exact classes only).";
  Metal_Type.tp_base = &Carrier_Type;
  Metal_Type.tp_new = Metal_new;
  Metal_Type.tp_init = Metal_init;
  Metal_Type.tp_dealloc = Metal_dealloc;
  if (add_type(module, &Metal_Type, "Metal") < 0) return -1;

  struct {
    PyTypeObject* type;
    const char* name;
    const char* doc;
    PyTypeObject* src;
    PyTypeObject* dst;
  } ops[] = {
      {&CpuToMetalMoveOperation_Type, "CpuToMetalMoveOperation",
       "Registered bulk move from CPU to Metal: copies the whole physical span to the device and synchronizes.",
       &CPU_Type, &Metal_Type},
      {&MetalToCpuMoveOperation_Type, "MetalToCpuMoveOperation",
       "Registered bulk move from Metal to CPU: copies the whole physical span to host memory and synchronizes "
       "before the host values are used or the Metal source is released.",
       &Metal_Type, &CPU_Type},
      {&MetalToMetalMoveOperation_Type, "MetalToMetalMoveOperation",
       "Registered bulk move between Metal carriers: one device copy of the whole physical span, synchronized "
       "before the source is released.",
       &Metal_Type, &Metal_Type},
  };
  for (auto& op : ops) {
    if (init_op(op.type, op.doc, op.src, op.dst) < 0) return -1;
    if (PyModule_AddObjectRef(module, op.name, reinterpret_cast<PyObject*>(op.type)) < 0) return -1;
    if (move_register_builtin(op.src, op.dst, op.type) < 0) return -1;
  }
  Ref hooks = Ref::steal(PyCapsule_New(const_cast<MetalTestHooks*>(&metal_test_hooks), kMetalTestHooksCapsule,
                                       nullptr));
  if (!hooks) return -1;
  return PyModule_AddObjectRef(module, "_metal_test_hooks", hooks.get());
}

}  // namespace swpy

// CPU: native host memory in one 64-byte aligned allocation (sw::AlignedBuffer)
// of Float32, Int32 or Bool slots, or a foreign host range adopted by
// strideweave.from_dlpack (cpu_adopt). The only built-in carrier that exports
// through DLPack.
#include <cstring>
#include <new>

#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/args.hpp"
#include "util/fastcall.hpp"
#include "util/type_object.hpp"

namespace swpy {

// Native host storage of a CPU carrier (for kernels and DLPack).
struct CPUObject {
  CarrierObject base;
  sw::AlignedBuffer buffer;
  Py_ssize_t size;
  sw::DTypeCode dtype;
};

namespace {

CPUObject* as_cpu(PyObject* o) { return reinterpret_cast<CPUObject*>(o); }
CPUObject* as_cpu(CarrierObject* o) { return reinterpret_cast<CPUObject*>(o); }

// Allocates storage for n slots into a fresh (size 0) CPU object.
int cpu_storage(CPUObject* o, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty) {
  if (engine_call([&] { o->buffer.allocate(sw::host_storage_bytes(n, dtype), !empty); }) < 0) return -1;
  o->size = n;
  o->dtype = dtype;
  o->base.constructed_mutable = mutable_;
  return 0;
}

// The slot's address, looked up after conversion: converting may run Python
// code (__float__, __index__) that released this carrier.
void* slot_base(CPUObject* o, Py_ssize_t i) {
  if (o->base.released || i >= o->size || !o->buffer.data()) {
    PyErr_SetString(PyExc_RuntimeError, "CPU carrier changed during the write");
    return nullptr;
  }
  return o->buffer.data();
}

int cpu_set_slot(CPUObject* o, Py_ssize_t i, PyObject* v) {
  const sw::DTypeCode code = o->dtype;
  const size_t item = static_cast<size_t>(sw::codec::slot_bytes(code));
  unsigned char bytes[sw::codec::kMaxSlotBytes];
  if (encode_slot(code, v, bytes) < 0) return -1;
  auto* data = static_cast<unsigned char*>(slot_base(o, i));
  if (!data) return -1;
  // Constant sizes: the copies compile to plain stores.
  if (item == 4)
    std::memcpy(data + static_cast<size_t>(i) * 4, bytes, 4);
  else
    std::memcpy(data + static_cast<size_t>(i), bytes, 1);
  return 0;
}

// A fresh instance of type (the receiver's exact class for new_like /
// allocate_like) with n slots. Python __init__ of a subclass is not run.
PyObject* cpu_make(PyTypeObject* type, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty) {
  Ref args = Ref::steal(PyTuple_New(0));
  if (!args) return nullptr;
  Ref self = Ref::steal(type->tp_new(type, args.get(), nullptr));
  if (!self) return nullptr;
  if (!PyObject_TypeCheck(self.get(), &CPU_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return a CPU carrier", type_name(type));
    return nullptr;
  }
  if (cpu_storage(as_cpu(self.get()), n, dtype, mutable_, empty) < 0) return nullptr;
  return self.release();
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return as_cpu(o)->dtype; }
Py_ssize_t vt_size(CarrierObject* o) { return as_cpu(o)->size; }

PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  CPUObject* o = as_cpu(c);
  const size_t item = static_cast<size_t>(sw::codec::slot_bytes(o->dtype));
  return decode_slot(o->dtype, static_cast<const unsigned char*>(o->buffer.data()) + static_cast<size_t>(i) * item);
}

int vt_set(CarrierObject* o, Py_ssize_t i, PyObject* v) { return cpu_set_slot(as_cpu(o), i, v); }

// Storage a DLPack consumer still views is retired, not freed: it reads as
// zeros until the last export dies (AlignedBuffer::release).
void vt_release(CarrierObject* c) {
  CPUObject* o = as_cpu(c);
  o->buffer.release();
  o->size = 0;
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  sw::DTypeCode code = as_cpu(c)->dtype;  // kept after release
  if (dtype && carrier_parse_dtype(sw::CarrierKind::CPU, dtype, &code) < 0) return nullptr;
  Ref seq = Ref::steal(carrier_values_snapshot(values, "new_like() values must be iterable"));
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  Ref r = Ref::steal(cpu_make(Py_TYPE(c), n, code, mutable_, true));
  if (!r) return nullptr;
  // r is not reachable from Python yet, so conversion code cannot release
  // it: encode straight into its buffer.
  auto* data = static_cast<unsigned char*>(as_cpu(r.get())->buffer.data());
  const size_t item = static_cast<size_t>(sw::codec::slot_bytes(code));
  PyObject** items = PySequence_Fast_ITEMS(seq.get());
  for (Py_ssize_t i = 0; i < n; ++i)
    if (carrier_encode_new_value(code, items[i], data + static_cast<size_t>(i) * item) < 0) return nullptr;
  return r.release();
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  sw::DTypeCode code = as_cpu(c)->dtype;
  if (dtype && carrier_parse_dtype(sw::CarrierKind::CPU, dtype, &code) < 0) return nullptr;
  return cpu_make(Py_TYPE(c), n, code, mutable_, empty);
}

// Fixed size: a CPU carrier never grows.
void* vt_host_data(CarrierObject* c) { return as_cpu(c)->buffer.data(); }

PyObject* vt_dlpack_info(CarrierObject* c) {
  PyObject* ptr = PyLong_FromVoidPtr(c->released ? nullptr : as_cpu(c)->buffer.data());
  if (!ptr) return nullptr;
  return Py_BuildValue("{s:N,s:i,s:i}", "pointer", ptr, "device_type", 1, "device_id", 0);
}

const CarrierVTable cpu_vt = {
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
    nullptr /* reserve: fixed size, cannot allocate */, vt_host_data, vt_dlpack_info,
};

// ------------------------------------------------------------ Python type

PyObject* CPU_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &cpu_vt);
  if (!self) return nullptr;
  CPUObject* o = as_cpu(self);
  new (&o->buffer) sw::AlignedBuffer();
  o->size = 0;
  o->dtype = sw::DTypeCode::Float32;
  return self;
}

// __init__ after its arguments were parsed.
int cpu_init_parsed(PyObject* self, Py_ssize_t n, PyObject* dtype, int mutable_, int empty) {
  CPUObject* o = as_cpu(self);
  // Re-initialising would swap storage under exported buffers and tensors.
  if (o->buffer.data() || o->base.released) {
    PyErr_SetString(PyExc_RuntimeError, "CPU.__init__() cannot be called twice");
    return -1;
  }
  sw::DTypeCode code;
  if (carrier_parse_dtype(sw::CarrierKind::CPU, dtype, &code) < 0) return -1;
  return cpu_storage(o, n, code, mutable_ != 0, empty != 0);
}

int CPU_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"size", "dtype", "mutable", "empty", nullptr};
  Py_ssize_t n;
  PyObject* dtype = dtype_singleton(sw::DTypeCode::Float32);
  int mutable_ = 1, empty = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|$Opp:CPU", const_cast<char**>(kw), cpu_size_arg, &n, &dtype, &mutable_,
                                   &empty))
    return -1;
  return cpu_init_parsed(self, n, dtype, mutable_, empty);
}

// Calling the type generically: tp_new then tp_init with a tuple and dict.
PyObject* cpu_call_generic(PyObject* type, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Ref tuple = Ref::steal(PyTuple_New(nargs));
  if (!tuple) return nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(tuple.get(), i, Py_NewRef(args[i]));
  Ref kwargs;
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nkw) {
    kwargs = Ref::steal(PyDict_New());
    if (!kwargs) return nullptr;
    for (Py_ssize_t i = 0; i < nkw; ++i)
      if (PyDict_SetItem(kwargs.get(), PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) return nullptr;
  }
  return PyType_Type.tp_call(type, tuple.get(), kwargs.get());
}

constexpr Signature kCpuSignature{"CPU", {"size", "dtype", "mutable", "empty"}, 1, 0, 1};

// CPU(n, empty=True) is on every move's path (a fresh destination): a call
// of the exact class is parsed here, without building a tuple and dict,
// converting in CPU_init's order (so the same argument fails first). A
// subclass goes through tp_new and tp_init (its __init__ may be Python's).
PyObject* CPU_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (type != reinterpret_cast<PyObject*>(&CPU_Type))
    return cpu_call_generic(type, args, PyVectorcall_NARGS(nargsf), kwnames);
  PyObject* a[4];
  if (parse_args(kCpuSignature, module_state.keywords.cpu, args, nargsf, kwnames, a) < 0) return nullptr;
  Py_ssize_t n;
  if (!cpu_size_arg(a[0], &n)) return nullptr;
  PyObject* dtype = a[1] ? a[1] : dtype_singleton(sw::DTypeCode::Float32);
  const int mutable_ = a[2] ? PyObject_IsTrue(a[2]) : 1;
  if (mutable_ < 0) return nullptr;
  const int empty = a[3] ? PyObject_IsTrue(a[3]) : 0;
  if (empty < 0) return nullptr;
  Ref self = Ref::steal(CPU_new(&CPU_Type, nullptr, nullptr));
  if (!self || cpu_init_parsed(self.get(), n, dtype, mutable_, empty) < 0) return nullptr;
  return self.release();
}

PyObject* CPU_alloc(PyTypeObject* type, Py_ssize_t nitems) {
  return pool_alloc<sizeof(CPUObject)>(module_state.cpu_pool, &CPU_Type, type, nitems);
}

void CPU_free(void* self) { pool_free(module_state.cpu_pool, &CPU_Type, self); }

void CPU_dealloc(PyObject* self) {
  as_cpu(self)->buffer.~AlignedBuffer();
  carrier_dealloc(self);
}

PyObject* CPU_pointer(PyObject* self, PyObject*) {
  CPUObject* o = as_cpu(self);
  return PyLong_FromVoidPtr(o->base.released ? nullptr : o->buffer.data());
}

PyMethodDef CPU_methods[] = {
    {"pointer", CPU_pointer, METH_NOARGS,
     "Address of slot 0 (64-byte aligned, except for memory from_dlpack adopted); 0 after release."},
    {"__reduce__", cpu_reduce, METH_NOARGS,
     "pickle / copy.deepcopy: the class, slot bytes, dtype and mutability; loads as a fresh carrier."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject CPU_Type = static_type("strideweave.CPU", sizeof(CPUObject));

PyObject* cpu_new(Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty) {
  if (!sw::supports_dtype(sw::CarrierKind::CPU, dtype)) {
    PyErr_SetString(PyExc_ValueError, "CPU supports only Float32, Int32 and Bool");
    return nullptr;
  }
  return cpu_make(&CPU_Type, n, dtype, mutable_, empty);
}

PyObject* cpu_adopt(void* data, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, sw::ForeignRelease release) {
  PyObject* self = CPU_new(&CPU_Type, nullptr, nullptr);
  if (!self) {
    if (release.release) release.release(release.ctx);
    return nullptr;
  }
  CPUObject* o = as_cpu(self);
  o->buffer.adopt(data, static_cast<size_t>(n) * static_cast<size_t>(sw::itemsize(dtype)), release);
  o->size = n;
  o->dtype = dtype;
  o->base.constructed_mutable = mutable_;
  return self;
}

PyObject* cpu_new_of_class(PyTypeObject* cls, Py_ssize_t n, sw::DTypeCode dtype, bool mutable_, bool empty) {
  return cpu_make(cls, n, dtype, mutable_, empty);
}

CpuStorage cpu_storage_of(PyObject* cpu) {
  CPUObject* o = as_cpu(cpu);
  return CpuStorage{o->base.released ? nullptr : o->buffer.data(), o->size, o->dtype};
}

sw::StorageControl* cpu_acquire_export_ref(PyObject* cpu) {
  CPUObject* o = as_cpu(cpu);
  return o->base.released ? nullptr : o->buffer.acquire_export_ref();
}

int cpu_module_init(PyObject* module) {
  CPU_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  CPU_Type.tp_doc =
      "CPU(size, *, dtype=DType.Float32, mutable=True, empty=False)\n\n"
      "Native host memory: one 64-byte aligned allocation of Float32, Int32 or Bool slots, zero-filled "
      "unless empty. Float32 slots accept int and float (rounded to binary32); Int32 slots accept int "
      "(OverflowError outside 32 bits); Bool slots accept only bool; numeric slots reject bool. "
      "pointer() is the storage address (0 after release). Exports through DLPack (device (1, 0)).";
  CPU_Type.tp_base = &Carrier_Type;
  CPU_Type.tp_new = CPU_new;
  CPU_Type.tp_init = CPU_init;
  CPU_Type.tp_vectorcall = CPU_vectorcall;
  CPU_Type.tp_dealloc = CPU_dealloc;
  CPU_Type.tp_alloc = CPU_alloc;
  CPU_Type.tp_free = CPU_free;
  CPU_Type.tp_methods = CPU_methods;
  return add_type(module, &CPU_Type, "CPU");
}

}  // namespace swpy

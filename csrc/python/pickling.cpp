// pickle and copy.deepcopy of tensors and carriers.
//
// A CPU carrier pickles as its class, its raw slot bytes, its dtype and
// whether it was constructed mutable; a Generic carrier as its values
// (pickled as objects). Loading makes a fresh carrier (version 0, unowned)
// of the same class; a Python subclass's __dict__ travels as pickle state.
// A Tensor pickles as Tensor(carrier, offset, layout): its whole carrier
// travels, so views of one carrier pickled together stay views of one
// carrier (pickle's memo), and the loaded tensor is a leaf (no autograd_ctx,
// no grad). copy.deepcopy goes through the same reductions.
//
// Every other carrier refuses with TypeError naming its class and the fix
// (move the tensor to CPU, or to Generic for dtypes CPU cannot hold): a
// FileBacked's file is removed with it, an Evictable owns its tiers, Metal
// memory is on a device, and extension carriers (TiledEvictable,
// TensorStoreCarrier, ...) keep their values behind Python hooks. A Python
// subclass of Carrier may define its own __reduce__, which wins.
#include <cstring>

#include "dtype/info.hpp"
#include "storage/slot_codec.hpp"
#include "carrier_object.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"

namespace swpy {

const char* move_fix_hint(sw::DTypeCode dtype) {
  const bool cpu_holds =
      dtype == sw::DTypeCode::Float32 || dtype == sw::DTypeCode::Int32 || dtype == sw::DTypeCode::Bool;
  return cpu_holds ? "move the tensor to CPU first (t = strideweave.move(t, strideweave.CPU(t.layout.cosize, "
                     "dtype=t.dtype())))"
                   : "move the tensor to Generic first (t = strideweave.move(t, strideweave.Generic([], "
                     "dtype=t.dtype())))";
}

namespace {

// The instance state a Python subclass keeps in its __dict__, or None.
PyObject* instance_state(PyObject* self) {
  if (Py_TYPE(self)->tp_dictoffset == 0) Py_RETURN_NONE;  // the built-in classes have none
  Ref d = Ref::steal(PyObject_GetAttrString(self, "__dict__"));
  if (!d) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  if (PyDict_Check(d.get()) && PyDict_GET_SIZE(d.get()) == 0) Py_RETURN_NONE;
  return d.release();
}

int refuse_released(PyObject* self) {
  PyErr_Format(PyExc_RuntimeError, "cannot pickle a released %s carrier: it holds no values", type_name(self));
  return -1;
}

PyObject* reconstructor(const char* name) {
  Ref core = Ref::steal(PyImport_ImportModule("strideweave._core"));
  return core ? PyObject_GetAttrString(core.get(), name) : nullptr;
}

// (fn, args, state) for pickle.
PyObject* reduction(const char* fn, PyObject* args, PyObject* self) {
  Ref a = Ref::steal(args);
  if (!a) return nullptr;
  Ref f = Ref::steal(reconstructor(fn));
  if (!f) return nullptr;
  Ref state = Ref::steal(instance_state(self));
  if (!state) return nullptr;
  return PyTuple_Pack(3, f.get(), a.get(), state.get());
}

PyObject* bool_obj(bool b) { return b ? Py_True : Py_False; }  // borrowed

// _cpu_from_bytes(cls, data, dtype, mutable): a fresh CPU-class carrier.
PyObject* mod_cpu_from_bytes(PyObject*, PyObject* args) {
  PyObject *cls, *dtype;
  Py_buffer data;
  int mutable_;
  if (!PyArg_ParseTuple(args, "Oy*Op:_cpu_from_bytes", &cls, &data, &dtype, &mutable_)) return nullptr;
  struct Releaser {
    Py_buffer* b;
    ~Releaser() { PyBuffer_Release(b); }
  } releaser{&data};
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &CPU_Type)) {
    PyErr_SetString(PyExc_TypeError, "_cpu_from_bytes() needs a CPU class");
    return nullptr;
  }
  sw::DTypeCode code;
  if (carrier_parse_dtype(sw::CarrierKind::CPU, dtype, &code) < 0) return nullptr;
  const Py_ssize_t item = sw::codec::slot_bytes(code);
  if (data.len % item != 0) {
    PyErr_SetString(PyExc_ValueError, "_cpu_from_bytes() data is not a whole number of slots");
    return nullptr;
  }
  const Py_ssize_t n = data.len / item;
  Ref c = Ref::steal(cpu_new_of_class(reinterpret_cast<PyTypeObject*>(cls), n, code, mutable_ != 0, /*empty=*/true));
  if (!c) return nullptr;
  const CpuStorage st = cpu_storage_of(c.get());
  if (n) std::memcpy(st.data, data.buf, static_cast<size_t>(data.len));
  return c.release();
}

// _generic_from_values(cls, values, dtype, mutable): a fresh Generic-class
// carrier (the values are coerced as Generic(values) coerces them).
PyObject* mod_generic_from_values(PyObject*, PyObject* args) {
  PyObject *cls, *values, *dtype;
  int mutable_;
  if (!PyArg_ParseTuple(args, "OOOp:_generic_from_values", &cls, &values, &dtype, &mutable_)) return nullptr;
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &Generic_Type)) {
    PyErr_SetString(PyExc_TypeError, "_generic_from_values() needs a Generic class");
    return nullptr;
  }
  return generic_new_of_class(reinterpret_cast<PyTypeObject*>(cls), values, dtype, mutable_ != 0);
}

// _empty_layout(shape, stride): the Layout of a zero-size tensor from its
// pickled trees, the shape's given as a Stride (a Shape refuses extent 0).
// Only layouts of size 0: every other one has a public constructor.
PyObject* mod_empty_layout(PyObject*, PyObject* args) {
  PyObject *shape, *stride;
  if (!PyArg_ParseTuple(args, "O!O!:_empty_layout", &Stride_Type, &shape, &Stride_Type, &stride)) return nullptr;
  sw::Layout l;
  if (engine_call([&] { l = sw::Layout(tree_of(shape), tree_of(stride)); }) < 0) return nullptr;
  if (l.size() != 0) {
    PyErr_SetString(PyExc_ValueError, "_empty_layout() builds only layouts with an extent-0 mode (pickle's "
                                      "reconstructor); use Layout(Shape(...), Stride(...))");
    return nullptr;
  }
  return layout_from_engine(std::move(l));
}

PyMethodDef pickling_functions[] = {
    {"_empty_layout", mod_empty_layout, METH_VARARGS,
     "_empty_layout(shape, stride): the Layout of a zero-size tensor, its shape given as a Stride (pickle's "
     "reconstructor)."},
    {"_cpu_from_bytes", mod_cpu_from_bytes, METH_VARARGS,
     "_cpu_from_bytes(cls, data, dtype, mutable): a fresh carrier of CPU class cls holding data (pickle's "
     "reconstructor)."},
    {"_generic_from_values", mod_generic_from_values, METH_VARARGS,
     "_generic_from_values(cls, values, dtype, mutable): a fresh carrier of Generic class cls (pickle's "
     "reconstructor)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyObject* empty_layout_reduce(PyObject* layout) {
  const sw::Layout& l = layout_of(layout);
  Ref shape = Ref::steal(stride_from_tree(l.shape()));
  Ref stride = Ref::steal(shape ? stride_from_tree(l.stride()) : nullptr);
  Ref f = Ref::steal(stride ? reconstructor("_empty_layout") : nullptr);
  if (!f) return nullptr;
  return Py_BuildValue("(O(OO))", f.get(), shape.get(), stride.get());
}

PyObject* empty_shape_reduce(PyObject* shape) {
  // getattr(<a zero-size Layout of this shape>, "shape"); the shape's own
  // tree serves as a congruent stride.
  sw::Layout engine;
  if (engine_call([&] { engine = sw::Layout(tree_of(shape), tree_of(shape)); }) < 0) return nullptr;
  Ref l = Ref::steal(layout_from_engine(std::move(engine)));
  Ref builtins = Ref::steal(l ? PyImport_ImportModule("builtins") : nullptr);
  Ref getattr = Ref::steal(builtins ? PyObject_GetAttrString(builtins.get(), "getattr") : nullptr);
  if (!getattr) return nullptr;
  return Py_BuildValue("(O(Os))", getattr.get(), l.get(), "shape");
}

PyObject* carrier_reduce(PyObject* self, PyObject*) {
  const char* cls = type_name(self);
  const char* why = "only CPU and Generic carriers (and tensors over them) can be pickled";
  if (PyObject_TypeCheck(self, &FileBacked_Type))
    why = "its values live in a file that is removed with the carrier";
  else if (PyObject_TypeCheck(self, &Evictable_Type))
    why = "it owns its two tiers, which a pickle cannot hand over";
  else if (PyObject_TypeCheck(self, &Metal_Type))
    why = "its values live in device memory";
  const CarrierObject* o = as_carrier(self);
  const sw::DTypeCode code = o->vt ? o->vt->dtype_code(as_carrier(self)) : sw::DTypeCode::Float32;
  PyErr_Format(PyExc_TypeError, "cannot pickle or deepcopy %s %s carrier: %s; %s and pickle that", article(cls), cls,
               why, move_fix_hint(code));
  return nullptr;
}

PyObject* cpu_reduce(PyObject* self, PyObject*) {
  if (carrier_is_released(self)) return refuse_released(self), nullptr;
  const CpuStorage st = cpu_storage_of(self);
  Ref data = Ref::steal(PyBytes_FromStringAndSize(static_cast<const char*>(st.data),
                                                  st.size * sw::codec::slot_bytes(st.dtype)));
  if (!data) return nullptr;
  return reduction("_cpu_from_bytes",
                   Py_BuildValue("(OOOO)", reinterpret_cast<PyObject*>(Py_TYPE(self)), data.get(),
                                 dtype_singleton(st.dtype), bool_obj(as_carrier(self)->constructed_mutable)),
                   self);
}

PyObject* generic_reduce(PyObject* self, PyObject*) {
  if (carrier_is_released(self)) return refuse_released(self), nullptr;
  Ref values = Ref::steal(generic_values_list(self));
  if (!values) return nullptr;
  Ref dtype = Ref::steal(carrier_dtype(self));
  if (!dtype) return nullptr;
  return reduction("_generic_from_values",
                   Py_BuildValue("(OOOO)", reinterpret_cast<PyObject*>(Py_TYPE(self)), values.get(), dtype.get(),
                                 bool_obj(as_carrier(self)->constructed_mutable)),
                   self);
}

PyObject* tensor_reduce(PyObject* self, PyObject*) {
  if (tensor_reject_multi(self, "pickling") < 0) return nullptr;
  TensorObject* t = as_tensor(self);
  if (dtype_code(t->dtype) == sw::DTypeCode::Compound) {
    // Tensor(carrier, offset, layout) would load with the carrier's dtype.
    PyErr_Format(PyExc_TypeError, "cannot pickle or deepcopy a tensor of the compound dtype %s", type_name(t->dtype));
    return nullptr;
  }
  return Py_BuildValue("(O(OnO))", reinterpret_cast<PyObject*>(Py_TYPE(self)), t->carrier, t->offset, t->layout);
}

int pickling_module_init(PyObject* module) { return PyModule_AddFunctions(module, pickling_functions); }

}  // namespace swpy

// DType: process-wide dtype singletons and the open CompoundDType base.
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "dtype/info.hpp"
#include "dtype_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

// One singleton per row of the engine's table (sw::builtin_dtypes()), kept
// in ModuleState::dtype_singletons.
static_assert(sw::kBuiltinDTypeCount <= ModuleState::kMaxBuiltinDTypes, "ModuleState::dtype_singletons is too small");

DTypeObject* as_dtype(PyObject* o) { return reinterpret_cast<DTypeObject*>(o); }

PyObject* DType_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (!PyType_IsSubtype(type, &CompoundDType_Type)) {
    PyErr_SetString(PyExc_TypeError,
                    "DType cannot be instantiated; use a DType.<name> singleton or DType.from_name()");
    return nullptr;
  }
  if ((args && PyTuple_GET_SIZE(args) != 0) || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "CompoundDType subclasses take no arguments");
    return nullptr;
  }
  if (type == &CompoundDType_Type) {
    PyErr_SetString(PyExc_TypeError, "CompoundDType is abstract; subclass it and set simple_types");
    return nullptr;
  }
  Ref st = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "simple_types"));
  if (!st) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must define simple_types, a tuple of simple dtypes", type->tp_name);
    return nullptr;
  }
  Ref tup = Ref::steal(PySequence_Tuple(st.get()));
  if (!tup) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s.simple_types must be a tuple of simple dtypes", type->tp_name);
    return nullptr;
  }
  if (PyTuple_GET_SIZE(tup.get()) == 0) {
    PyErr_Format(PyExc_ValueError, "%s.simple_types must not be empty", type->tp_name);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup.get()); ++i) {
    PyObject* d = PyTuple_GET_ITEM(tup.get(), i);
    if (!is_dtype(d) || !sw::dtype_is_simple(as_dtype(d)->code)) {
      PyErr_Format(PyExc_TypeError, "%s.simple_types must hold simple dtypes only", type->tp_name);
      return nullptr;
    }
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  as_dtype(self)->code = sw::DTypeCode::Compound;
  // Not type->tp_name: renaming the class frees that buffer. Readers name a
  // compound by type_name(d).
  as_dtype(self)->name = "CompoundDType";
  as_dtype(self)->simple_types = tup.release();
  return self;
}

void DType_dealloc(PyObject* self) {
  Py_CLEAR(as_dtype(self)->simple_types);
  Py_TYPE(self)->tp_free(self);
}

bool is_compound(PyObject* self) { return as_dtype(self)->code == sw::DTypeCode::Compound; }

PyObject* DType_repr(PyObject* self) {
  if (is_compound(self)) return PyUnicode_FromFormat("%s()", type_name(self));
  return PyUnicode_FromFormat("DType.%s", as_dtype(self)->name);
}

PyObject* DType_get_name(PyObject* self, void*) {
  if (is_compound(self)) return PyUnicode_FromString(type_name(self));
  return PyUnicode_FromString(as_dtype(self)->name);
}

PyObject* DType_get_bits(PyObject* self, void*) {
  const sw::DTypeInfo* bi = sw::dtype_info(as_dtype(self)->code);
  if (!bi || bi->bits == 0) Py_RETURN_NONE;
  return PyLong_FromLong(bi->bits);
}

PyObject* DType_get_supertype(PyObject* self, void*) {
  const std::optional<sw::DTypeCode> super = sw::dtype_supertype(as_dtype(self)->code);
  if (!super) Py_RETURN_NONE;
  return Py_NewRef(dtype_singleton(*super));
}

PyObject* DType_get_simple_types(PyObject* self, void*) {
  if (!is_compound(self)) Py_RETURN_NONE;
  return Py_NewRef(as_dtype(self)->simple_types);
}

PyObject* DType_is_simple(PyObject* self, PyObject*) {
  return PyBool_FromLong(sw::dtype_is_simple(as_dtype(self)->code));
}
PyObject* DType_is_category(PyObject* self, PyObject*) {
  return PyBool_FromLong(sw::dtype_is_category(as_dtype(self)->code));
}
PyObject* DType_is_compound(PyObject* self, PyObject*) { return PyBool_FromLong(is_compound(self)); }

bool same_dtype(PyObject* a, PyObject* b) {
  if (a == b) return true;
  return is_compound(a) && is_compound(b) && Py_TYPE(a) == Py_TYPE(b);
}

PyObject* DType_is_subtype_of(PyObject* self, PyObject* other) {
  if (!is_dtype(other)) {
    PyErr_SetString(PyExc_TypeError, "is_subtype_of() expects a DType");
    return nullptr;
  }
  // A compound is a subtype of another only when it is that very class.
  if (is_compound(other)) return PyBool_FromLong(same_dtype(self, other));
  return PyBool_FromLong(sw::dtype_is_subtype_of(as_dtype(self)->code, as_dtype(other)->code));
}

PyObject* DType_from_name(PyObject*, PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "DType.from_name() expects a str");
    return nullptr;
  }
  const char* s = PyUnicode_AsUTF8(name);
  if (!s) return nullptr;
  if (const std::optional<sw::DTypeCode> code = sw::dtype_from_name(s))
    return Py_NewRef(dtype_singleton(*code));
  PyErr_Format(PyExc_ValueError, "unknown dtype name %R", name);
  return nullptr;
}

PyObject* DType_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !is_dtype(b)) Py_RETURN_NOTIMPLEMENTED;
  bool eq = same_dtype(a, b);
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

Py_hash_t DType_hash(PyObject* self) {
  if (is_compound(self)) return _Py_HashPointer(Py_TYPE(self));
  return _Py_HashPointer(self);
}

PyObject* DType_reduce(PyObject* self, PyObject*) {
  if (is_compound(self))
    return Py_BuildValue("(O())", reinterpret_cast<PyObject*>(Py_TYPE(self)));
  PyObject* from_name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&DType_Type), "from_name");
  if (!from_name) return nullptr;
  PyObject* r = Py_BuildValue("(N(s))", from_name, as_dtype(self)->name);
  return r;
}

PyMethodDef DType_methods[] = {
    {"is_simple", DType_is_simple, METH_NOARGS, "True for a storage dtype with a fixed width."},
    {"is_category", DType_is_category, METH_NOARGS, "True for Any, Floating and Integer."},
    {"is_compound", DType_is_compound, METH_NOARGS, "True for a CompoundDType instance."},
    {"is_subtype_of", DType_is_subtype_of, METH_O, "True when other is this dtype or one of its supertypes."},
    {"from_name", DType_from_name, METH_O | METH_STATIC,
     "from_name(name): a built-in dtype by its name (\"Float32\") or by NumPy's name for the same element type "
     "(\"float32\", \"int32\", \"bool\", \"float64\")."},
    {"__reduce__", DType_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef DType_getset[] = {
    {"name", DType_get_name, nullptr, "dtype name", nullptr},
    {"bits", DType_get_bits, nullptr, "bit width, None for categories", nullptr},
    {"supertype", DType_get_supertype, nullptr, "parent in the dtype hierarchy", nullptr},
    {"simple_planes", DType_get_simple_types, nullptr, "storage planes of a compound dtype", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

namespace {

// _as_dtype(x): the DType a dtype= argument names, for the Python carriers'
// own dtype= parameters (TensorStoreCarrier.create).
PyObject* mod_as_dtype(PyObject*, PyObject* arg) {
  PyObject* d = nullptr;
  const int r = dtype_resolve(arg, &d);
  if (r < 0) return nullptr;
  if (r == 0) {
    PyErr_Format(PyExc_TypeError, "dtype must be a DType (or a NumPy dtype), not %.100s", type_name(arg));
    return nullptr;
  }
  return Py_NewRef(d);
}

PyMethodDef dtype_functions[] = {
    {"_as_dtype", mod_as_dtype, METH_O,
     "_as_dtype(x): the DType x names (a DType, or a NumPy dtype or scalar type); TypeError otherwise."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject DType_Type = static_type("strideweave.DType", sizeof(DTypeObject));

PyTypeObject CompoundDType_Type = static_type("strideweave.CompoundDType", sizeof(DTypeObject));

bool is_dtype(PyObject* o) { return PyObject_TypeCheck(o, &DType_Type); }

PyObject* dtype_singleton(sw::DTypeCode code) {
  const std::span<const sw::DTypeInfo> table = sw::builtin_dtypes();
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].code == code) return module_state.dtype_singletons[i];
  return nullptr;
}

bool dtype_is_differentiable(PyObject* d) { return sw::dtype_is_differentiable(as_dtype(d)->code); }

namespace {

// Whether t or one of its bases is the class named name (NumPy's classes,
// recognised without importing NumPy).
bool has_base_named(PyTypeObject* t, const char* name) {
  for (; t; t = t->tp_base)
    if (std::strcmp(t->tp_name, name) == 0) return true;
  return false;
}

int numpy_dtype_unknown(PyObject* arg) {
  PyErr_Format(PyExc_ValueError,
               "NumPy dtype %R has no StrideWeave DType: tensors hold float32, int32 and bool (sw.float32, "
               "sw.int32, sw.bool_; float64 is DType.Float64, an accumulator name)",
               arg);
  return -1;
}

}  // namespace

int dtype_resolve(PyObject* arg, PyObject** out) {
  if (is_dtype(arg)) {
    *out = arg;
    return 1;
  }
  std::string name;
  if (PyType_Check(arg) && has_base_named(reinterpret_cast<PyTypeObject*>(arg), "numpy.generic")) {
    // A scalar type: its class name is "numpy.<dtype name>".
    const char* n = reinterpret_cast<PyTypeObject*>(arg)->tp_name;
    name = std::strncmp(n, "numpy.", 6) == 0 ? n + 6 : n;
  } else if (has_base_named(Py_TYPE(arg), "numpy.dtype")) {
    Ref native = Ref::steal(PyObject_GetAttrString(arg, "isnative"));
    if (!native) return -1;
    const int is_native = PyObject_IsTrue(native.get());
    if (is_native < 0) return -1;
    if (!is_native) {
      PyErr_Format(PyExc_ValueError, "NumPy dtype %R is not in native byte order (StrideWeave stores native values)",
                   arg);
      return -1;
    }
    Ref n = Ref::steal(PyObject_GetAttrString(arg, "name"));
    if (!n) return -1;
    const char* s = PyUnicode_Check(n.get()) ? PyUnicode_AsUTF8(n.get()) : nullptr;
    if (!s) return PyErr_Occurred() ? -1 : numpy_dtype_unknown(arg);
    name = s;
  } else {
    return 0;
  }
  const std::optional<sw::DTypeCode> code = sw::numpy_dtype_from_name(name);
  if (!code) return numpy_dtype_unknown(arg);
  *out = dtype_singleton(*code);
  return 1;
}

int dtype_module_init(PyObject* module) {
  DType_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  DType_Type.tp_doc = "Descriptor of a logical or storage dtype; built-ins are singletons.";
  DType_Type.tp_new = DType_new;
  DType_Type.tp_dealloc = DType_dealloc;
  DType_Type.tp_repr = DType_repr;
  DType_Type.tp_methods = DType_methods;
  DType_Type.tp_getset = DType_getset;
  DType_Type.tp_richcompare = DType_richcompare;
  DType_Type.tp_hash = DType_hash;
  CompoundDType_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  CompoundDType_Type.tp_doc =
      "Open base of multi-plane logical dtypes: subclass it, set simple_types, instantiate with no arguments.";
  CompoundDType_Type.tp_base = &DType_Type;
  CompoundDType_Type.tp_new = DType_new;
  if (add_type(module, &DType_Type, "DType") < 0) return -1;
  if (add_type(module, &CompoundDType_Type, "CompoundDType") < 0) return -1;
  const std::span<const sw::DTypeInfo> table = sw::builtin_dtypes();
  for (size_t i = 0; i < table.size(); ++i) {
    PyObject* d = DType_Type.tp_alloc(&DType_Type, 0);
    if (!d) return -1;
    as_dtype(d)->code = table[i].code;
    as_dtype(d)->name = table[i].name;
    as_dtype(d)->simple_types = nullptr;
    module_state.dtype_singletons[i] = d;  // module lifetime: never released
    if (PyDict_SetItemString(DType_Type.tp_dict, table[i].name, d) < 0) return -1;
  }
  PyType_Modified(&DType_Type);
  // NumPy-style aliases of the storage dtypes: sw.float32 is DType.Float32.
  const struct {
    const char* alias;
    sw::DTypeCode code;
  } aliases[] = {{"float32", sw::DTypeCode::Float32}, {"int32", sw::DTypeCode::Int32}, {"bool_", sw::DTypeCode::Bool}};
  for (const auto& a : aliases)
    if (PyModule_AddObjectRef(module, a.alias, dtype_singleton(a.code)) < 0) return -1;
  return PyModule_AddFunctions(module, dtype_functions);
}

}  // namespace swpy

// DType: process-wide dtype singletons and the open CompoundDType base.
#include <cstring>

#include "dtype_object.hpp"
#include "module.hpp"
#include "module_state.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace {

struct BuiltinInfo {
  sw::DTypeCode code;
  const char* name;
  int bits;  // 0: None
  sw::DTypeCode super;
  bool has_super;
  bool category;
};

constexpr BuiltinInfo kBuiltins[] = {
    {sw::DTypeCode::Any, "Any", 0, sw::DTypeCode::Any, false, true},
    {sw::DTypeCode::Floating, "Floating", 0, sw::DTypeCode::Any, true, true},
    {sw::DTypeCode::Integer, "Integer", 0, sw::DTypeCode::Any, true, true},
    {sw::DTypeCode::Float32, "Float32", 32, sw::DTypeCode::Floating, true, false},
    {sw::DTypeCode::Float64, "Float64", 64, sw::DTypeCode::Floating, true, false},
    {sw::DTypeCode::Int32, "Int32", 32, sw::DTypeCode::Integer, true, false},
    {sw::DTypeCode::Bool, "Bool", 8, sw::DTypeCode::Any, true, false},
};
constexpr int kBuiltinCount = sizeof(kBuiltins) / sizeof(kBuiltins[0]);

static_assert(kBuiltinCount <= ModuleState::kMaxBuiltinDTypes, "ModuleState::dtype_singletons is too small");

const BuiltinInfo* info_of(sw::DTypeCode c) {
  for (const auto& b : kBuiltins)
    if (b.code == c) return &b;
  return nullptr;
}

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
  PyObject* st = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "simple_types");
  if (!st) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must define simple_types, a tuple of simple dtypes", type->tp_name);
    return nullptr;
  }
  PyObject* tup = PySequence_Tuple(st);
  Py_DECREF(st);
  if (!tup) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s.simple_types must be a tuple of simple dtypes", type->tp_name);
    return nullptr;
  }
  if (PyTuple_GET_SIZE(tup) == 0) {
    Py_DECREF(tup);
    PyErr_Format(PyExc_ValueError, "%s.simple_types must not be empty", type->tp_name);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); ++i) {
    PyObject* d = PyTuple_GET_ITEM(tup, i);
    const BuiltinInfo* bi = is_dtype(d) ? info_of(as_dtype(d)->code) : nullptr;
    if (!bi || bi->category) {
      Py_DECREF(tup);
      PyErr_Format(PyExc_TypeError, "%s.simple_types must hold simple dtypes only", type->tp_name);
      return nullptr;
    }
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) { Py_DECREF(tup); return nullptr; }
  as_dtype(self)->code = sw::DTypeCode::Compound;
  // Not type->tp_name: renaming the class frees that buffer. Readers name a
  // compound by type_name(d).
  as_dtype(self)->name = "CompoundDType";
  as_dtype(self)->simple_types = tup;
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
  const BuiltinInfo* bi = info_of(as_dtype(self)->code);
  if (!bi || bi->bits == 0) Py_RETURN_NONE;
  return PyLong_FromLong(bi->bits);
}

PyObject* DType_get_supertype(PyObject* self, void*) {
  if (is_compound(self)) return Py_NewRef(dtype_singleton(sw::DTypeCode::Any));
  const BuiltinInfo* bi = info_of(as_dtype(self)->code);
  if (!bi->has_super) Py_RETURN_NONE;
  return Py_NewRef(dtype_singleton(bi->super));
}

PyObject* DType_get_simple_types(PyObject* self, void*) {
  if (!is_compound(self)) Py_RETURN_NONE;
  return Py_NewRef(as_dtype(self)->simple_types);
}

PyObject* DType_is_simple(PyObject* self, PyObject*) {
  const BuiltinInfo* bi = info_of(as_dtype(self)->code);
  return PyBool_FromLong(bi && !bi->category);
}
PyObject* DType_is_category(PyObject* self, PyObject*) {
  const BuiltinInfo* bi = info_of(as_dtype(self)->code);
  return PyBool_FromLong(bi && bi->category);
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
  PyObject* cur = Py_NewRef(self);
  while (cur != Py_None) {
    if (same_dtype(cur, other)) { Py_DECREF(cur); Py_RETURN_TRUE; }
    PyObject* next = DType_get_supertype(cur, nullptr);
    Py_DECREF(cur);
    if (!next) return nullptr;
    cur = next;
  }
  Py_DECREF(cur);
  Py_RETURN_FALSE;
}

PyObject* DType_from_name(PyObject*, PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "DType.from_name() expects a str");
    return nullptr;
  }
  const char* s = PyUnicode_AsUTF8(name);
  if (!s) return nullptr;
  for (int i = 0; i < kBuiltinCount; ++i)
    if (std::strcmp(kBuiltins[i].name, s) == 0) return Py_NewRef(module_state.dtype_singletons[i]);
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
    {"from_name", DType_from_name, METH_O | METH_STATIC, "Look a built-in dtype up by name."},
    {"__reduce__", DType_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef DType_getset[] = {
    {"name", DType_get_name, nullptr, "dtype name", nullptr},
    {"bits", DType_get_bits, nullptr, "bit width, None for categories", nullptr},
    {"supertype", DType_get_supertype, nullptr, "parent in the dtype hierarchy", nullptr},
    {"simple_planes", DType_get_simple_types, nullptr, "storage planes of a compound dtype", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject DType_Type = static_type("strideweave.DType", sizeof(DTypeObject));

PyTypeObject CompoundDType_Type = static_type("strideweave.CompoundDType", sizeof(DTypeObject));

bool is_dtype(PyObject* o) { return PyObject_TypeCheck(o, &DType_Type); }

PyObject* dtype_singleton(sw::DTypeCode code) {
  for (int i = 0; i < kBuiltinCount; ++i)
    if (kBuiltins[i].code == code) return module_state.dtype_singletons[i];
  return nullptr;
}

bool dtype_is_differentiable(PyObject* d) {
  sw::DTypeCode c = as_dtype(d)->code;
  return c == sw::DTypeCode::Float32 || c == sw::DTypeCode::Float64 || c == sw::DTypeCode::Floating;
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
  for (int i = 0; i < kBuiltinCount; ++i) {
    PyObject* d = DType_Type.tp_alloc(&DType_Type, 0);
    if (!d) return -1;
    as_dtype(d)->code = kBuiltins[i].code;
    as_dtype(d)->name = kBuiltins[i].name;
    as_dtype(d)->simple_types = nullptr;
    module_state.dtype_singletons[i] = d;  // module lifetime: never released
    if (PyDict_SetItemString(DType_Type.tp_dict, kBuiltins[i].name, d) < 0) return -1;
  }
  PyType_Modified(&DType_Type);
  return 0;
}

}  // namespace swpy

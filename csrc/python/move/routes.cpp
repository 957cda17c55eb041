// Which operation performs a move: the legacy exact-pair registry (with its
// module functions and the registered_move_operation context manager), the
// operation classes' pins, and route resolution (carrier-definition hooks
// first, then the registry, then ElementwiseMoveOperation). The registry
// itself is the engine's sw::movement::RouteTable; its entries pin their
// classes with strong references.
#include <cstdint>
#include <new>

#include "move/internal.hpp"
#include "carrier_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"
#include "movement/route_table.hpp"

namespace swpy {

namespace move_internal {

// Constant-initialised: the hooks may be installed before any other
// initialisation of this file has run.

}  // namespace move_internal

MoveRouteHooks& move_route_hooks = move_internal::state.route_hooks;

namespace move_internal {

namespace {

PyObject* as_object(PyTypeObject* t) { return reinterpret_cast<PyObject*>(t); }
PyTypeObject* as_class(PyObject* o) { return reinterpret_cast<PyTypeObject*>(o); }

using sw::movement::ClassKey;
using sw::movement::RouteTable;

ClassKey key(PyObject* o) { return reinterpret_cast<ClassKey>(o); }
ClassKey key(PyTypeObject* t) { return reinterpret_cast<ClassKey>(t); }
PyObject* object(ClassKey k) { return reinterpret_cast<PyObject*>(k); }

// Entries pin their classes (the GIL is held for every registry call).
void pin(ClassKey k) { Py_INCREF(object(k)); }
void unpin(ClassKey k) { Py_DECREF(object(k)); }  // raw: pin()'s reference, which the engine's entry held

RouteTable& table() { return *state.registry; }

bool is_carrier_class(PyObject* o) { return PyType_Check(o) && PyType_IsSubtype(as_class(o), &Carrier_Type); }

bool is_move_op_class(PyObject* o) { return PyType_Check(o) && PyType_IsSubtype(as_class(o), &MoveOperation_Type); }

int check_carrier_class(PyObject* o, const char* param) {
  if (is_carrier_class(o)) return 0;
  PyErr_Format(PyExc_TypeError, "%s must be a Carrier subclass, not %R", param, o);
  return -1;
}

// The argument checks shared by every legacy registry API.
int check_pair(PyObject* src, PyObject* dst) {
  if (check_carrier_class(src, "source_class") < 0 || check_carrier_class(dst, "destination_class") < 0) return -1;
  if (state.route_hooks.legacy_check && state.route_hooks.legacy_check(as_class(src), as_class(dst)) < 0) return -1;
  return 0;
}

int check_op_class(PyObject* op) {
  if (is_move_op_class(op)) return 0;
  PyErr_Format(PyExc_TypeError, "operation_class must be a MoveOperation subclass, not %R", op);
  return -1;
}

// The checks of register_move_operation and registered_move_operation.
int check_registration(PyObject* src, PyObject* dst, PyObject* op) {
  if (check_carrier_class(src, "source_class") < 0 || check_carrier_class(dst, "destination_class") < 0 ||
      check_op_class(op) < 0 || check_pair(src, dst) < 0)
    return -1;
  return 0;
}

// ValueError naming both classes and the holder of the exact pair.
int raise_taken(PyTypeObject* src, PyTypeObject* dst, ClassKey holder) {
  PyErr_Format(PyExc_ValueError, "a move operation is already registered for (%s, %s): %s; unregister it first",
               type_name(src), type_name(dst), class_name(object(holder)));
  return -1;
}

// 0 when the exact pair is free, else raise_taken.
int check_free(PyTypeObject* src, PyTypeObject* dst) {
  const auto holder = table().find(key(src), key(dst));
  return holder ? raise_taken(src, dst, *holder) : 0;
}

int registry_add(PyTypeObject* src, PyTypeObject* dst, PyObject* op) {
  std::optional<ClassKey> holder;
  if (engine_call([&] { holder = table().add(key(src), key(dst), key(op)); }) < 0) return -1;
  return holder ? raise_taken(src, dst, *holder) : 0;
}

// Removes the exact pair; new reference to the removed class, or NULL with
// KeyError naming both classes.
PyObject* registry_remove(PyTypeObject* src, PyTypeObject* dst) {
  const auto op = table().remove(key(src), key(dst));
  if (op) return object(*op);  // the entry's pin is now the caller's reference
  Ref msg = Ref::steal(
      PyUnicode_FromFormat("no move operation is registered for (%s, %s)", type_name(src), type_name(dst)));
  if (msg) PyErr_SetObject(PyExc_KeyError, msg.get());
  return nullptr;
}

PyObject* registry_lookup(PyTypeObject* src, PyTypeObject* dst) {
  return Py_NewRef(object(table().resolve(key(src), key(dst), key(&ElementwiseMoveOperation_Type))));
}

// ------------------------------------------------------------ module functions

PyObject* mod_dispatch_move(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", nullptr};
  PyObject *src, *dst;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:dispatch_move", const_cast<char**>(kwlist), &src, &dst))
    return nullptr;
  if (check_pair(src, dst) < 0) return nullptr;
  return registry_lookup(as_class(src), as_class(dst));
}

PyObject* mod_register(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", "operation_class", nullptr};
  PyObject *src, *dst, *op;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:register_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst, &op))
    return nullptr;
  if (check_registration(src, dst, op) < 0 || registry_add(as_class(src), as_class(dst), op) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* mod_unregister(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", nullptr};
  PyObject *src, *dst;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:unregister_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst))
    return nullptr;
  if (check_pair(src, dst) < 0) return nullptr;
  return registry_remove(as_class(src), as_class(dst));
}

// ------------------------------------------------------------ registered_move_operation

// A context manager registering on entry and unregistering on exit (normal
// or raising), never suppressing.
struct ScopedRegObject {
  PyObject_HEAD
  PyObject* src;
  PyObject* dst;
  PyObject* op;
  RouteTable::Scope scope;  // registers (src, dst) -> op while entered
};

PyTypeObject ScopedReg_Type = static_type("strideweave._core.registered_move_operation", sizeof(ScopedRegObject));

ScopedRegObject* as_scoped(PyObject* o) { return reinterpret_cast<ScopedRegObject*>(o); }

void ScopedReg_dealloc(PyObject* self) {
  Py_CLEAR(as_scoped(self)->src);
  Py_CLEAR(as_scoped(self)->dst);
  Py_CLEAR(as_scoped(self)->op);
  Py_TYPE(self)->tp_free(self);
}

PyObject* ScopedReg_enter(PyObject* self, PyObject*) {
  ScopedRegObject* s = as_scoped(self);
  if (engine_call([s] { s->scope.check_enterable(); }) < 0 || check_pair(s->src, s->dst) < 0) return nullptr;
  std::optional<ClassKey> holder;
  if (engine_call([&] { holder = s->scope.enter(table()); }) < 0) return nullptr;
  if (holder) {
    raise_taken(as_class(s->src), as_class(s->dst), *holder);
    return nullptr;
  }
  return Py_NewRef(s->op);
}

// Never suppresses; the scope leaves an entry the body replaced alone.
PyObject* ScopedReg_exit(PyObject* self, PyObject*) {
  as_scoped(self)->scope.exit(table());
  Py_RETURN_FALSE;
}

PyMethodDef ScopedReg_methods[] = {{"__enter__", ScopedReg_enter, METH_NOARGS, nullptr},
                                   {"__exit__", ScopedReg_exit, METH_VARARGS, nullptr},
                                   {nullptr, nullptr, 0, nullptr}};

PyObject* mod_registered(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"source_class", "destination_class", "operation_class", nullptr};
  PyObject *src, *dst, *op;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:registered_move_operation", const_cast<char**>(kwlist), &src,
                                   &dst, &op))
    return nullptr;
  if (check_registration(src, dst, op) < 0) return nullptr;
  // Duplicates are rejected now too, so a bad block fails before it starts.
  if (check_free(as_class(src), as_class(dst)) < 0) return nullptr;
  PyObject* self = ScopedReg_Type.tp_alloc(&ScopedReg_Type, 0);
  if (!self) return nullptr;
  ScopedRegObject* s = as_scoped(self);
  s->src = Py_NewRef(src);
  s->dst = Py_NewRef(dst);
  s->op = Py_NewRef(op);
  new (&s->scope) RouteTable::Scope(key(src), key(dst), key(op));
  return self;
}

PyMethodDef route_methods[] = {
    {"dispatch_move", method_cast(mod_dispatch_move), METH_VARARGS | METH_KEYWORDS,
     "dispatch_move(source_class, destination_class)\n--\n\nThe operation class registered for this exact pair, "
     "else ElementwiseMoveOperation."},
    {"register_move_operation", method_cast(mod_register), METH_VARARGS | METH_KEYWORDS,
     "register_move_operation(source_class, destination_class, operation_class)\n--\n\nRegister operation_class "
     "for the exact pair; ValueError when the pair already has one."},
    {"unregister_move_operation", method_cast(mod_unregister), METH_VARARGS | METH_KEYWORDS,
     "unregister_move_operation(source_class, destination_class)\n--\n\nRemove and return the operation class of "
     "the exact pair; KeyError when none."},
    {"registered_move_operation", method_cast(mod_registered), METH_VARARGS | METH_KEYWORDS,
     "registered_move_operation(source_class, destination_class, operation_class)\n--\n\nContext manager: "
     "registers the exact pair on entry (yielding operation_class) and unregisters it on exit."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// ------------------------------------------------------------ pins

int check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst) {
  static const char* const attrs[2] = {"source_class", "destination_class"};
  PyTypeObject* actual[2] = {src, dst};
  for (int k = 0; k < 2; ++k) {
    Ref pin = Ref::steal(PyObject_GetAttrString(op_class, attrs[k]));
    if (!pin) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
      continue;
    }
    if (pin.get() == Py_None || pin.get() == as_object(actual[k])) continue;
    if (PyType_Check(pin.get()))
      PyErr_Format(PyExc_TypeError, "%s requires %s carrier class %s, got %s", class_name(op_class),
                   k == 0 ? "source" : "destination", class_name(pin.get()), type_name(actual[k]));
    else
      PyErr_Format(PyExc_TypeError, "%s.%s must be a Carrier class or None, not %R", class_name(op_class), attrs[k],
                   pin.get());
    return -1;
  }
  return 0;
}

// ------------------------------------------------------------ resolution cache

// Only pairs of built-in (static) classes resolved to a built-in operation
// are remembered: static types are never freed (no address reuse), cannot be
// changed (their pins stay what check_pins saw), and never have a carrier
// definition (the extension's resolve hook leaves them to the legacy
// registry), so the legacy registry's generation alone decides whether a
// remembered resolution still holds. Every other pair resolves each time.
namespace {

bool is_static(PyTypeObject* t) { return (t->tp_flags & Py_TPFLAGS_HEAPTYPE) == 0; }

RouteCacheEntry& cache_slot(PyTypeObject* src, PyTypeObject* dst) {
  const auto h = (reinterpret_cast<std::uintptr_t>(src) >> 4) ^ (reinterpret_cast<std::uintptr_t>(dst) >> 6);
  return state.route_cache[h % MoveState::kRouteCacheSize];
}

}  // namespace

PyObject* cached_route(PyTypeObject* src, PyTypeObject* dst) {
  const RouteCacheEntry& e = cache_slot(src, dst);
  if (e.src != src || e.dst != dst || !e.op || e.generation != table().generation()) return nullptr;
  return e.op;
}

void remember_route(PyTypeObject* src, PyTypeObject* dst, PyObject* op) {
  if (!is_static(src) || !is_static(dst) || !PyType_Check(op) || !is_static(as_class(op))) return;
  RouteCacheEntry& e = cache_slot(src, dst);
  e.src = src;
  e.dst = dst;
  e.op = op;
  e.generation = table().generation();
}

PyObject* resolve_checked(PyTypeObject* src, PyTypeObject* dst) {
  if (PyObject* op = cached_route(src, dst)) return Py_NewRef(op);
  Ref op = Ref::steal(move_resolve_route(src, dst));
  if (!op || check_pins(op.get(), src, dst) < 0) return nullptr;
  remember_route(src, dst, op.get());
  return op.release();
}

int routes_init(PyObject* module) {
  ScopedReg_Type.tp_flags = Py_TPFLAGS_DEFAULT;
  ScopedReg_Type.tp_doc = "Context manager returned by registered_move_operation().";
  ScopedReg_Type.tp_dealloc = ScopedReg_dealloc;
  ScopedReg_Type.tp_methods = ScopedReg_methods;
  if (PyType_Ready(&ScopedReg_Type) < 0) return -1;

  // Process lifetime: never destroyed, so no pin is released after the
  // interpreter is gone.
  state.registry = new (std::nothrow) RouteTable(sw::movement::Retainer{pin, unpin});
  if (!state.registry) {
    PyErr_NoMemory();
    return -1;
  }
  if (move_register_builtin(&CPU_Type, &FileBacked_Type, &CpuToFileBackedMoveOperation_Type) < 0 ||
      move_register_builtin(&FileBacked_Type, &CPU_Type, &FileBackedToCpuMoveOperation_Type) < 0)
    return -1;
  return PyModule_AddFunctions(module, route_methods);
}

}  // namespace move_internal

using move_internal::state;

int move_check_pins(PyObject* op_class, PyTypeObject* src, PyTypeObject* dst) {
  return move_internal::check_pins(op_class, src, dst);
}

int move_register_builtin(PyTypeObject* src, PyTypeObject* dst, PyTypeObject* op) {
  if (!state.registry) {
    PyErr_SetString(PyExc_RuntimeError, "the move registry is not initialised yet");
    return -1;
  }
  return move_internal::registry_add(src, dst, reinterpret_cast<PyObject*>(op));
}

PyObject* move_resolve_route(PyTypeObject* src, PyTypeObject* dst) {
  if (state.route_hooks.resolve) {
    PyObject* op = nullptr;
    const int r = state.route_hooks.resolve(src, dst, &op);
    if (r < 0) return nullptr;
    if (r > 0) return op;
  }
  return move_internal::registry_lookup(src, dst);
}

}  // namespace swpy

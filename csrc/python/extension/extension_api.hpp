// What the rest of the binding layer calls in the carrier-extension family.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>



namespace swpy {

// Definition-backed Python carriers; carrier.cpp calls these from Carrier's
// tp_new / tp_init.
// Observes type and its Python bases (definition sealing). 1 when type's
// storage comes from a CarrierDefinition (own or inherited), 0 when not,
// -1 with an exception.
int extension_observe_class(PyTypeObject* type);
// __init__ of a definition-backed class: Cls(slots, *, dtype, mutable=True)
// checks the dtype with supports_dtype, installs the storage-provider
// vtable and allocates the slots. 0 / -1.
int extension_carrier_init(PyObject* self, PyObject* args, PyObject* kwargs);
// A built-in class whose carriers compose other carriers (TiledEvictable):
// definition-backed with its own native storage, no routes and no
// elementwise fallback, so public moves naming it raise NotImplementedError
// and the legacy registry refuses it (RuntimeError, "TransferRoute"), as for
// a Python class with such a CarrierDefinition. Called at module init. 0 / -1.
int extension_define_native(PyTypeObject* cls);

}  // namespace swpy

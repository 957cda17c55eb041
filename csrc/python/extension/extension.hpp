// Internal to the carrier-extension family (extension.cpp: registry, routes
// and hooks; extension/storage.cpp: definition-backed storage). Everything
// here needs the GIL.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module_state.hpp"

namespace swpy::ext {

// The family's globals live in ModuleState (module_state.hpp).
inline ExtensionState& g = module_state.extension;

// getattr(o, name) as a new reference (name: one of g.name).
inline PyObject* field(PyObject* o, PyObject* name) { return PyObject_GetAttr(o, name); }

// Observes cls and every Python base (sealing them) and returns cls's own
// StorageProvider (borrowed) or NULL when cls is definition-free. 0 / -1.
int observe(PyTypeObject* cls, PyObject** storage);

}  // namespace swpy::ext

// The carrier-extension family's globals (a member of ModuleState).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "carriers/registry.hpp"

namespace swpy::ext {

// Process-lifetime state of the extension (a sealed class's dispatch never
// changes, so nothing here is ever dropped).
struct ExtensionState {
  // The record classes from extension.py (NULL until it is imported).
  PyObject* storage_type = nullptr;
  PyObject* transfer_provider_type = nullptr;
  PyObject* route_type = nullptr;
  PyObject* definition_type = nullptr;
  PyObject* request_type = nullptr;
  PyObject* prepared_type = nullptr;
  PyObject* unsupported_type = nullptr;
  // The registry's rules and tables (engine, keyed by type addresses). The
  // Python objects its handles point at stay alive here: definitions holds
  // each defined class and its StorageProvider, route_of each route class.
  sw::ext::Registry registry;
  PyObject* definitions = nullptr;  // cls -> its StorageProvider
  PyObject* route_of = nullptr;     // route operation class -> TransferRoute
  PyObject* observed = nullptr;     // id(cls) -> weakref(cls), forgetting it when cls dies
  // Interned attribute names of the records.
  struct {
    PyObject *supports_dtype, *physical_size, *allocate, *release, *read, *write, *elementwise_fallback;
    PyObject *storage, *transfers, *source_class, *destination_class, *route_id, *provider, *prepare, *submit,
        *reason, *wait;
  } name{};
};

}  // namespace swpy::ext

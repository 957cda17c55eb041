// The move family's globals (a member of ModuleState).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "move/move.hpp"
#include "movement/route_table.hpp"

namespace swpy::move_internal {

// One resolved exact pair (routes.cpp: resolve_checked): valid while the
// registry's generation is still the one it was taken at.
struct RouteCacheEntry {
  PyTypeObject* src = nullptr;
  PyTypeObject* dst = nullptr;
  PyObject* op = nullptr;
  uint64_t generation = 0;
};

struct MoveState {
  // Installed by extension.cpp (see MoveRouteHooks); all NULL until then.
  MoveRouteHooks route_hooks = {nullptr, nullptr, nullptr, nullptr, nullptr};
  // The legacy registry: (src class, dst class) -> operation class.
  // Process lifetime.
  sw::movement::RouteTable* registry = nullptr;
  // The built-in _copy descriptors (borrowed from the type dicts), to
  // recognise operations whose copy can run natively without the GIL (a
  // subclass that overrides _copy is not native).
  PyObject* elementwise_copy = nullptr;
  PyObject* bulk_copy_c2f = nullptr;
  PyObject* bulk_copy_f2c = nullptr;
  // Interned "_copy" (plan_copy looks it up on every move).
  PyObject* copy_name = nullptr;
  // Resolved pairs of built-in classes (see resolve_checked).
  static constexpr int kRouteCacheSize = 4;
  RouteCacheEntry route_cache[kRouteCacheSize];
};

}  // namespace swpy::move_internal

// The move family's globals (a member of ModuleState).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <cstddef>

#include "move/move.hpp"

namespace swpy::move_internal {

struct MoveState {
  // Installed by extension.cpp (see MoveRouteHooks); all NULL until then.
  MoveRouteHooks route_hooks = {nullptr, nullptr, nullptr, nullptr, nullptr};
  // The legacy registry: dict (src class, dst class) -> operation class.
  // Process lifetime.
  PyObject* registry = nullptr;
  // The built-in _copy descriptors (borrowed from the type dicts), to
  // recognise operations whose copy can run natively without the GIL (a
  // subclass that overrides _copy is not native).
  PyObject* elementwise_copy = nullptr;
  PyObject* bulk_copy_c2f = nullptr;
  PyObject* bulk_copy_f2c = nullptr;
  // Moves submitted and not yet committed, so interpreter exit can wait for
  // them. A plain atomic (no lock) so a forked child can simply reset it:
  // its parent's jobs never run there.
  std::atomic<size_t> in_flight{0};
};

}  // namespace swpy::move_internal

// The private hook between _core's Metal binding and the test-only
// strideweave._testing extension (csrc/python_testing), which owns the fake
// runtime: _core exports a capsule named kMetalTestHooksCapsule as
// _core._metal_test_hooks holding a MetalTestHooks table. Both modules are
// built together from one tree, so the table may use C++ types; the version
// guards against a stale _testing next to a newer _core.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memory>

#include "metal/runtime.hpp"

namespace swpy {

inline constexpr char kMetalTestHooksCapsule[] = "strideweave._core._metal_test_hooks";
inline constexpr unsigned kMetalTestHooksVersion = 1;

struct MetalTestHooks {
  unsigned version;  // kMetalTestHooksVersion
  // Installs rt as the process Metal runtime of _core (null removes it);
  // existing carriers keep the runtime that allocated their buffer.
  void (*install_runtime)(std::shared_ptr<sw::metal::Runtime> rt);
  // The device buffer of a Metal carrier (0: none). 0 / -1 with TypeError
  // when obj is not a Metal carrier.
  int (*buffer_id)(PyObject* obj, sw::metal::BufferId* out);
};

}  // namespace swpy

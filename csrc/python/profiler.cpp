// Profiling sessions (temporary: no session is ever active yet).
#include "sw.hpp"

namespace swpy {

PyObject* profiler_current() { return nullptr; }
int64_t profiler_new_id(PyObject*) { return 0; }
int64_t profiler_parent_id(PyObject*) { return 0; }
void profiler_push(PyObject*, int64_t) {}
void profiler_pop(PyObject*) {}
int profiler_record(PyObject*, int64_t, int64_t, const char*, PyObject*, PyObject*, PyObject*,
                    int64_t, int64_t, uint64_t, bool) {
  return 0;
}
int profiler_module_init(PyObject*) { return 0; }

}  // namespace swpy

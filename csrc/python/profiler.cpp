#include "sw.hpp"

namespace swpy {
int profiler_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

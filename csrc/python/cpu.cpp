#include "sw.hpp"

namespace swpy {
int cpu_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

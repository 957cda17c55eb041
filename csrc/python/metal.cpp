#include "sw.hpp"

namespace swpy {
int metal_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

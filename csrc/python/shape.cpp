#include "sw.hpp"

namespace swpy {
int shape_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

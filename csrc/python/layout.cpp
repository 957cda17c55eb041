#include "sw.hpp"

namespace swpy {
int layout_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

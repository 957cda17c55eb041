#include "sw.hpp"

namespace swpy {
int ops_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

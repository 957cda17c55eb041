#include "sw.hpp"

namespace swpy {
int operation_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

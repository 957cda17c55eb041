#include "sw.hpp"

namespace swpy {
int generic_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

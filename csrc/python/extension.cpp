#include "sw.hpp"

namespace swpy {
int extension_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

#include "sw.hpp"

namespace swpy {
int autograd_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

#include "sw.hpp"

namespace swpy {
int tensor_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

#include "sw.hpp"

namespace swpy {
int await_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

#include "sw.hpp"

namespace swpy {
int move_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

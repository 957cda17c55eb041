#include "sw.hpp"

namespace swpy {
int representation_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

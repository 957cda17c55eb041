#include "sw.hpp"

namespace swpy {
int carrier_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

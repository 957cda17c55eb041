#include "sw.hpp"

namespace swpy {
int evictable_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

#include "sw.hpp"

namespace swpy {
int dlpack_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

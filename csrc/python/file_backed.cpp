#include "sw.hpp"

namespace swpy {
int file_backed_module_init(PyObject*) { return 0; }  // placeholder
}  // namespace swpy

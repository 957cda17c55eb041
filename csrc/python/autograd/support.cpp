// Small helpers shared by the autograd family (see autograd/internal.hpp).
#include "autograd/internal.hpp"

#include <string>

#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "tensor_object.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"

namespace swpy::autograd {

const char* dtype_label(PyObject* dtype) {
  if (!dtype) return "?";
  if (dtype_code(dtype) == sw::DTypeCode::Compound) return type_name(dtype);
  return reinterpret_cast<DTypeObject*>(dtype)->name;
}

bool differentiable(PyObject* tensor) {
  PyObject* d = as_tensor(tensor)->dtype;
  return d && dtype_is_differentiable(d);
}

PyObject* shape_obj(PyObject* tensor) { return reinterpret_cast<LayoutObject*>(as_tensor(tensor)->layout)->shape; }

int add_error_context(const char* who, const char* what) {
  std::string at = std::string(who) + what;
  const std::string prefix = at;
  while (!at.empty() && (at.back() == ' ' || at.back() == ':')) at.pop_back();  // "add(): " -> "add()"
  return locate_error(prefix.c_str(), "", ("in " + at).c_str());
}

}  // namespace swpy::autograd

// Small helpers shared by the autograd family (see autograd/internal.hpp).
#include "autograd/internal.hpp"

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

PyObject* shape_obj(PyObject* tensor) { return layout_shape_or_none(as_tensor(tensor)->layout); }

}  // namespace swpy::autograd

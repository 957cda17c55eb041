// The Tensor family: the Tensor object (tensor.cpp) and the Tensor methods
// other files implement (DLPack export, dlpack.cpp).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <span>
#include <vector>

#include "dtype/dtype.hpp"
#include "layout_object.hpp"
#include "layout/slice.hpp"

namespace swpy {

struct TensorObject {
  PyObject_HEAD
  PyObject* weakreflist;
  PyObject* carrier;
  Py_ssize_t offset;
  PyObject* layout;
  PyObject* dtype;           // logical dtype
  PyObject* representation;  // TensorRepresentation for multi-subtensor; else NULL
  PyObject* autograd_ctx;    // Operation or NULL (read through tensor_autograd_ctx)
  PyObject* grad;            // Tensor or NULL
  bool retains_grad;
  // A view made in grad mode whose SliceOperation node is not built yet:
  // the source tensor (strong) and its carrier's version at view time. The
  // node is built when anything asks for autograd_ctx (tensor_autograd_ctx).
  PyObject* view_source;
  uint64_t view_version;
};
extern PyTypeObject Tensor_Type;
inline bool is_tensor(PyObject* o) { return PyObject_TypeCheck(o, &Tensor_Type); }
inline TensorObject* as_tensor(PyObject* o) { return reinterpret_cast<TensorObject*>(o); }
// The tensor's autograd_ctx (borrowed; NULL for a leaf), building a
// deferred view node first. -1 with an exception when building it failed.
int tensor_autograd_ctx(PyObject* t, PyObject** out);
// Validating constructor (same checks as Tensor(...)).
PyObject* tensor_new(PyObject* carrier, Py_ssize_t offset, PyObject* layout);
// A Tensor at offset 0 over a built-in carrier the caller has just made
// (no Python hooks) whose dtype is dtype and whose slots cover layout's
// cosize: nothing is checked (strideweave.from_dlpack's results).
PyObject* tensor_over_native(PyObject* carrier, PyObject* layout, sw::DTypeCode dtype);
// True for a multi-subtensor tensor.
inline bool tensor_is_multi(PyObject* t) { return as_tensor(t)->representation != nullptr; }
// Raises NotImplementedError("Multi-subtensor Tensor <reason> is not
// implemented ...") and returns -1 for a multi-subtensor tensor; else 0.
int tensor_reject_multi(PyObject* t, const char* reason);


// A view of t over the same carrier at offset, in layout (borrowed): t's
// logical dtype, no autograd node. tensor.cpp.
PyObject* tensor_alloc_view(PyObject* t, Py_ssize_t offset, PyObject* layout);

// Indexing (tensor_index.cpp): t[key] reads or writes an element (an int or
// a coordinate tuple) or makes a view (a key holding a slice, ... or None).
PyObject* tensor_getitem(PyObject* self, PyObject* key);
int tensor_setitem(PyObject* self, PyObject* key, PyObject* value);
// A view key parsed into the engine's parts (TypeError for a bad part).
int tensor_parse_view_key(PyObject* key, std::vector<sw::SlicePart>* out);
// The view key selects (key_obj, nullable, names the key in messages); in
// grad mode a differentiable view gets a SliceOperation node.
PyObject* tensor_view(PyObject* self, std::span<const sw::SlicePart> key, PyObject* key_obj);
PyObject* tensor_view_unrecorded(PyObject* self, std::span<const sw::SlicePart> key, PyObject* key_obj);
// The view with its SliceOperation node (autograd/ops_view.cpp).
PyObject* view_forward(PyObject* source, std::span<const sw::SlicePart> key, PyObject* key_obj);
// The SliceOperation node of a deferred view (t->view_source set): inputs
// (source,), its version, and the view's offset and layout (autograd/ops_view.cpp).
PyObject* view_node(PyObject* view);
// pickle / copy.deepcopy: Tensor(carrier, offset, layout) (pickling.cpp).
PyObject* tensor_reduce(PyObject* self, PyObject* unused);
// repr(t): values, dtype, carrier class, layout (tensor_repr.cpp).
PyObject* tensor_repr(PyObject* self);
// Tensor.shape, Tensor.ndim, len(t), iter(t).
PyObject* tensor_get_shape(PyObject* self, void*);
PyObject* tensor_get_ndim(PyObject* self, void*);
Py_ssize_t tensor_len(PyObject* self);
PyObject* tensor_iter(PyObject* self);

// DLPack export (dlpack.cpp): __dlpack__ for a METH_FASTCALL | METH_KEYWORDS
// table entry (a kwargs dict would dominate the export's cost).
PyObject* tensor_dlpack_fastcall(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused);

}  // namespace swpy

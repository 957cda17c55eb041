// The DLPack C exchange API (API.md section 15): Tensor.__dlpack_c_exchange_api__
// is a PyCapsule "dlpack_exchange_api" holding one static DLPackExchangeAPI,
// so a consumer (tvm_ffi.from_dlpack, ...) exports without a capsule per
// call. StrideWeave is export-only: the two functions that would build a
// StrideWeave tensor from foreign memory exist (the struct requires them)
// and fail with BufferError.
#include "dlpack_exchange.hpp"
#include <dlpack/dlpack.h>

// The build requires dlpack >= 1.3 (meson.build), which declares the C
// exchange API structs.
static_assert(DLPACK_MAJOR_VERSION > 1 || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3),
              "the DLPack C exchange API needs dlpack.h 1.3 or newer");
#include "layout_object.hpp"
#include "module.hpp"
#include "tensor_object.hpp"
#include "util/errors.hpp"
#include "util/gil_gate.hpp"
#include "util/ref.hpp"

namespace swpy {

namespace {

constexpr const char* kCapsuleName = "dlpack_exchange_api";
constexpr const char* kExportOnly =
    "StrideWeave is export-only: it cannot create or adopt tensors through the DLPack exchange API";

// The consumer passes the object it found the API on; anything else is
// refused rather than misread.
int check_tensor(void* py_object) {
  if (py_object && is_tensor(static_cast<PyObject*>(py_object))) return 0;
  PyErr_Format(PyExc_TypeError, "the StrideWeave DLPack exchange API exports Tensor objects, not %.100s",
               py_object ? type_name(static_cast<PyObject*>(py_object)) : "NULL");
  return -1;
}

// Exactly what __dlpack__(max_version=(1, 0)) puts in its capsule.
int managed_from_object(void* py_object, DLManagedTensorVersioned** out) {
  *out = nullptr;
  if (check_tensor(py_object) < 0) return -1;
  *out = dlpack_export_v1(static_cast<PyObject*>(py_object));
  return *out ? 0 : -1;
}

// The DLTensor's shape and strides must outlive this call without an
// allocation per call: each Layout keeps one block (shape, then strides)
// built on first use and freed with the Layout, which the Tensor keeps alive
// as long as the consumer's borrowed view is valid.
const int64_t* dims_of(PyObject* layout_obj) {
  LayoutObject* lo = reinterpret_cast<LayoutObject*>(layout_obj);
  if (!lo->dl_dims) lo->dl_dims = sw::dlpack::dims_block(lo->layout.leaves());
  return lo->dl_dims;
}

// The same export as a borrowed DLTensor: valid while the Tensor lives.
int dltensor_from_object(void* py_object, DLTensor* out) {
  if (check_tensor(py_object) < 0) return -1;
  PyObject* tensor = static_cast<PyObject*>(py_object);
  sw::dlpack::ExportSpec spec;
  if (dlpack_describe_v1(tensor, &spec) < 0) return -1;
  const size_t ndim = spec.leaves.size();
  static int64_t no_dims[1] = {0};  // ndim 0: valid, never read
  const int64_t* dims = ndim ? dims_of(as_tensor(tensor)->layout) : no_dims;
  if (!dims) {
    PyErr_NoMemory();
    return -1;
  }
  sw::dlpack::fill_dltensor(spec, dims, out);
  return 0;
}

// Export-only: reported through SetError when the consumer gave one (it
// raises for itself), else as a Python BufferError.
int allocator(DLTensor*, DLManagedTensorVersioned** out, void* error_ctx,
              void (*set_error)(void* error_ctx, const char* kind, const char* message)) {
  if (out) *out = nullptr;
  if (set_error) {
    set_error(error_ctx, "BufferError", kExportOnly);
    return -1;
  }
  PyGILState_STATE g;
  if (!gil_gate::ensure(&g)) return -1;  // the process is exiting: no Python error to set
  PyErr_SetString(PyExc_BufferError, kExportOnly);
  PyGILState_Release(g);
  return -1;
}

// Export-only. The header says the tensor's ownership is stolen, so it is
// disposed of here rather than leaked.
int to_object(DLManagedTensorVersioned* tensor, void** out_py_object) {
  if (out_py_object) *out_py_object = nullptr;
  if (tensor && tensor->deleter) tensor->deleter(tensor);
  PyErr_SetString(PyExc_BufferError, kExportOnly);
  return -1;
}

// CPU has no stream; neither does any other device StrideWeave exports from
// (export does no work a stream could order).
int current_work_stream(DLDeviceType, int32_t, void** out_current_stream) {
  if (out_current_stream) *out_current_stream = nullptr;
  return 0;
}

const DLPackExchangeAPI kApi = {
    {{1, 3}, nullptr},
    allocator,
    managed_from_object,
    to_object,
    dltensor_from_object,
    current_work_stream,
};

}  // namespace

int dlpack_exchange_module_init(PyObject*) {
  Ref capsule = Ref::steal(PyCapsule_New(const_cast<DLPackExchangeAPI*>(&kApi), kCapsuleName, nullptr));
  if (!capsule) return -1;
  if (PyDict_SetItemString(Tensor_Type.tp_dict, "__dlpack_c_exchange_api__", capsule.get()) < 0) return -1;
  PyType_Modified(&Tensor_Type);
  return 0;
}

}  // namespace swpy

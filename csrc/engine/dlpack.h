// The DLPack 1.x ABI (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h),
// declared here by us: only the parts StrideWeave produces.
//
// Why our own declaration instead of the upstream header: a registry package
// shipping dlpack.h would have to become a build requirement. NumPy vendors the
// header but does not install it, and torch does install it but is far too
// heavy to require for building a wheel. The ABI is small and frozen for 1.x,
// so we declare it and pin every offset and size below (LP64: x86_64 and
// aarch64), which turns any transcription mistake into a compile error.
//
// Plain C-compatible structs with the upstream names, so the layout is exactly
// what consumers (NumPy, PyTorch, JAX) read from the capsule pointer.
#ifndef STRIDEWEAVE_DLPACK_H_
#define STRIDEWEAVE_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

// DLDeviceType is a C enum (int-sized) upstream; we use int32_t, which has the
// same size and alignment on every LP64 ABI we build for.
typedef int32_t DLDeviceType;
enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL would mean compact row-major
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

// Flag bits of DLManagedTensorVersioned::flags.
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}  // extern "C"
#endif

// ABI pins (LP64). Upstream layouts: DLTensor 48 bytes, DLManagedTensor 64,
// DLManagedTensorVersioned 80.
#ifdef __cplusplus
#define SW_DLPACK_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define SW_DLPACK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
SW_DLPACK_STATIC_ASSERT(sizeof(void*) == 8, "DLPack ABI pins assume an LP64 target");
SW_DLPACK_STATIC_ASSERT(sizeof(DLPackVersion) == 8, "DLPackVersion size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLPackVersion, major) == 0, "DLPackVersion.major");
SW_DLPACK_STATIC_ASSERT(offsetof(DLPackVersion, minor) == 4, "DLPackVersion.minor");
SW_DLPACK_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLDevice, device_type) == 0, "DLDevice.device_type");
SW_DLPACK_STATIC_ASSERT(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id");
SW_DLPACK_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLDataType, code) == 0, "DLDataType.code");
SW_DLPACK_STATIC_ASSERT(offsetof(DLDataType, bits) == 1, "DLDataType.bits");
SW_DLPACK_STATIC_ASSERT(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes");
SW_DLPACK_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, data) == 0, "DLTensor.data");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, device) == 8, "DLTensor.device");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
SW_DLPACK_STATIC_ASSERT(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
SW_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensor) == 64, "DLManagedTensor size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor.dl_tensor");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");
SW_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned size");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0, "DLManagedTensorVersioned.version");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                        "DLManagedTensorVersioned.manager_ctx");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 16, "DLManagedTensorVersioned.deleter");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24, "DLManagedTensorVersioned.flags");
SW_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
                        "DLManagedTensorVersioned.dl_tensor");
#undef SW_DLPACK_STATIC_ASSERT

#endif  // STRIDEWEAVE_DLPACK_H_

// strideweave._testing's DLPack producer: capsules over memory of its own,
// with a deleter that counts its calls (and can report each on a file
// descriptor, for tests of interpreter exit), so the tests of
// strideweave.from_dlpack can see that every path runs the deleter exactly
// once. The data lives in the managed tensor's own malloc'd block, freed by
// the deleter: under ASan a read after a premature deleter call is caught.
//
//   dlpack_capsule(data, shape, strides=None, *, dtype=(2, 32, 1),
//                  byte_offset=0, device=(1, 0), versioned=True, flags=0,
//                  major=1) -> capsule
//   dlpack_exchange_api(*, api_minor=3, tensor_major=1, fails=False)
//                                     a C exchange API capsule over the same blocks
//   dlpack_deleted() -> int           deleter calls so far
//   dlpack_report_deletions(fd)       write "deleted\n" to fd on each call
#include "dlpack_producer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include <dlpack/dlpack.h>

#include "util/ref.hpp"
#include "util/type_object.hpp"

namespace swtesting {

namespace {

std::atomic<long long> g_deleted{0};
std::atomic<int> g_report_fd{-1};

// One block: the managed tensor (legacy or versioned), shape, strides, data.
struct Block {
  union {
    DLManagedTensor legacy;
    DLManagedTensorVersioned versioned;
  };
  int64_t dims[2 * 16];  // shape, then strides (rank <= 16)
  alignas(64) unsigned char data[1];
};

// No Python, no locks: callable from any thread, with or without the GIL,
// and after finalization began (as DLPack requires of a deleter).
void count_and_free(void* block) noexcept {
  std::free(block);
  g_deleted.fetch_add(1);
  const int fd = g_report_fd.load();
  if (fd >= 0) {
    const char msg[] = "deleted\n";
    ssize_t r = ::write(fd, msg, sizeof msg - 1);
    (void)r;
  }
}

void legacy_deleter(DLManagedTensor* m) { count_and_free(m->manager_ctx); }
void versioned_deleter(DLManagedTensorVersioned* m) { count_and_free(m->manager_ctx); }

// An unconsumed capsule deletes its tensor; a consumed (renamed) one is the
// consumer's.
void capsule_destructor(PyObject* capsule) {
  const char* name = PyCapsule_GetName(capsule);
  if (!name) {
    PyErr_Clear();
    return;
  }
  void* p = PyCapsule_GetPointer(capsule, name);
  if (!p) {
    PyErr_Clear();
    return;
  }
  if (std::strcmp(name, "dltensor") == 0) {
    auto* m = static_cast<DLManagedTensor*>(p);
    m->deleter(m);
  } else if (std::strcmp(name, "dltensor_versioned") == 0) {
    auto* m = static_cast<DLManagedTensorVersioned*>(p);
    m->deleter(m);
  }
}

// A tuple or list of ints into out (at most 16); -1 with an exception.
int int_list(PyObject* o, const char* what, int64_t* out, int* n) {
  swpy::Ref seq = swpy::Ref::steal(PySequence_Tuple(o));
  if (!seq) return -1;
  const Py_ssize_t len = PyTuple_GET_SIZE(seq.get());
  if (len > 16) {
    PyErr_Format(PyExc_ValueError, "%s: at most 16 entries", what);
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq.get(), i));
    if (out[i] == -1 && PyErr_Occurred()) return -1;
  }
  *n = static_cast<int>(len);
  return 0;
}

PyObject* dlpack_capsule(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"data", "shape", "strides", "dtype", "byte_offset", "device", "versioned", "flags",
                             "major", nullptr};
  Py_buffer data;
  PyObject* shape_obj;
  PyObject* strides_obj = Py_None;
  int code = kDLFloat, bits = 32, lanes = 1, device_type = kDLCPU, device_id = 0, versioned = 1;
  unsigned long long byte_offset = 0, flags = 0;
  unsigned int major = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|O$(iii)K(ii)pKI:dlpack_capsule", const_cast<char**>(kw),
                                   &data, &shape_obj, &strides_obj, &code, &bits, &lanes, &byte_offset, &device_type,
                                   &device_id, &versioned, &flags, &major))
    return nullptr;
  struct Releaser {
    Py_buffer* b;
    ~Releaser() { PyBuffer_Release(b); }
  } releaser{&data};
  int64_t shape[16], strides[16];
  int ndim = 0, nstrides = 0;
  if (int_list(shape_obj, "shape", shape, &ndim) < 0) return nullptr;
  const bool has_strides = strides_obj != Py_None;
  if (has_strides && int_list(strides_obj, "strides", strides, &nstrides) < 0) return nullptr;
  if (has_strides && nstrides != ndim) {
    PyErr_SetString(PyExc_ValueError, "strides must have one entry per dimension");
    return nullptr;
  }
  const size_t bytes = (sizeof(Block) + static_cast<size_t>(data.len) + 63) / 64 * 64;
  auto* b = static_cast<Block*>(std::aligned_alloc(alignof(Block), bytes));
  if (!b) return PyErr_NoMemory();
  std::memset(static_cast<void*>(b), 0, bytes);
  std::memcpy(b->data, data.buf, static_cast<size_t>(data.len));
  std::memcpy(b->dims, shape, sizeof(int64_t) * static_cast<size_t>(ndim));
  if (has_strides) std::memcpy(b->dims + 16, strides, sizeof(int64_t) * static_cast<size_t>(ndim));
  DLTensor* t = versioned ? &b->versioned.dl_tensor : &b->legacy.dl_tensor;
  t->data = data.len ? b->data : nullptr;
  t->device = DLDevice{static_cast<DLDeviceType>(device_type), device_id};
  t->ndim = ndim;
  t->dtype = DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  t->shape = b->dims;
  t->strides = has_strides ? b->dims + 16 : nullptr;
  t->byte_offset = byte_offset;
  if (versioned) {
    b->versioned.version = DLPackVersion{major, 0};
    b->versioned.manager_ctx = b;
    b->versioned.deleter = versioned_deleter;
    b->versioned.flags = flags;
  } else {
    b->legacy.manager_ctx = b;
    b->legacy.deleter = legacy_deleter;
  }
  PyObject* cap = PyCapsule_New(versioned ? static_cast<void*>(&b->versioned) : static_cast<void*>(&b->legacy),
                                versioned ? "dltensor_versioned" : "dltensor", capsule_destructor);
  if (!cap) std::free(b);  // never handed out: not a deletion to count
  return cap;
}

// ---- a DLPack C exchange API whose export is [1.0, 2.0] (float32) from
// the same counting blocks; the knobs are process-wide (tests set them).
uint32_t g_exchange_tensor_major = 1;
bool g_exchange_fails = false;

int exchange_managed_from(void*, DLManagedTensorVersioned** out) {
  *out = nullptr;
  if (g_exchange_fails) {
    PyErr_SetString(PyExc_RuntimeError, "the test exchange API refuses");
    return -1;
  }
  const size_t bytes = (sizeof(Block) + 2 * sizeof(float) + 63) / 64 * 64;
  auto* b = static_cast<Block*>(std::aligned_alloc(alignof(Block), bytes));
  if (!b) {
    PyErr_NoMemory();
    return -1;
  }
  std::memset(static_cast<void*>(b), 0, bytes);
  const float values[2] = {1.0f, 2.0f};
  std::memcpy(b->data, values, sizeof values);
  b->dims[0] = 2;
  b->dims[16] = 1;
  DLTensor* t = &b->versioned.dl_tensor;
  t->data = b->data;
  t->device = DLDevice{kDLCPU, 0};
  t->ndim = 1;
  t->dtype = DLDataType{kDLFloat, 32, 1};
  t->shape = b->dims;
  t->strides = b->dims + 16;
  b->versioned.version = DLPackVersion{g_exchange_tensor_major, 0};
  b->versioned.manager_ctx = b;
  b->versioned.deleter = versioned_deleter;
  *out = &b->versioned;
  return 0;
}

int exchange_refuse_tensor(DLTensor*, DLManagedTensorVersioned** out, void*, void (*)(void*, const char*, const char*)) {
  if (out) *out = nullptr;
  PyErr_SetString(PyExc_BufferError, "not part of the test exchange API");
  return -1;
}

int exchange_refuse_object(DLManagedTensorVersioned* t, void** out) {
  if (out) *out = nullptr;
  if (t && t->deleter) t->deleter(t);
  PyErr_SetString(PyExc_BufferError, "not part of the test exchange API");
  return -1;
}

int exchange_refuse_dltensor(void*, DLTensor*) {
  PyErr_SetString(PyExc_BufferError, "not part of the test exchange API");
  return -1;
}

int exchange_no_stream(DLDeviceType, int32_t, void** stream) {
  if (stream) *stream = nullptr;
  return 0;
}

DLPackExchangeAPI g_exchange_api = {
    {{1, 3}, nullptr},
    exchange_refuse_tensor,
    exchange_managed_from,
    exchange_refuse_object,
    exchange_refuse_dltensor,
    exchange_no_stream,
};

PyObject* dlpack_exchange_api(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"api_minor", "tensor_major", "fails", nullptr};
  unsigned int api_minor = 3, tensor_major = 1;
  int fails = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$IIp:dlpack_exchange_api", const_cast<char**>(kw), &api_minor,
                                   &tensor_major, &fails))
    return nullptr;
  g_exchange_api.header.version.minor = api_minor;
  g_exchange_tensor_major = tensor_major;
  g_exchange_fails = fails != 0;
  return PyCapsule_New(&g_exchange_api, "dlpack_exchange_api", nullptr);
}

PyObject* dlpack_deleted(PyObject*, PyObject*) { return PyLong_FromLongLong(g_deleted.load()); }

PyObject* dlpack_report_deletions(PyObject*, PyObject* arg) {
  const long fd = PyLong_AsLong(arg);
  if (fd == -1 && PyErr_Occurred()) return nullptr;
  g_report_fd.store(static_cast<int>(fd));
  Py_RETURN_NONE;
}

}  // namespace

PyMethodDef dlpack_producer_functions[] = {
    {"dlpack_capsule", swpy::method_cast(dlpack_capsule), METH_VARARGS | METH_KEYWORDS,
     "dlpack_capsule(data, shape, strides=None, *, dtype=(2, 32, 1), byte_offset=0, device=(1, 0), "
     "versioned=True, flags=0, major=1): a DLPack capsule over a private copy of data (bytes-like, 64-byte "
     "aligned, freed by the deleter); shape and strides as given (strides None: none in the struct)."},
    {"dlpack_exchange_api", swpy::method_cast(dlpack_exchange_api), METH_VARARGS | METH_KEYWORDS,
     "dlpack_exchange_api(*, api_minor=3, tensor_major=1, fails=False): a 'dlpack_exchange_api' capsule "
     "(one process-wide struct: the last call's settings hold) whose managed_tensor_from_py_object_no_sync "
     "exports float32 [1.0, 2.0] with the counting deleter (RuntimeError when fails)."},
    {"dlpack_deleted", dlpack_deleted, METH_NOARGS, "How many deleters of this producer's tensors have run."},
    {"dlpack_report_deletions", dlpack_report_deletions, METH_O,
     "dlpack_report_deletions(fd): each deleter call also writes 'deleted\\n' to fd (-1: stop)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace swtesting

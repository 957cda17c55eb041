// strideweave._testing: the test-only extension. It owns the host-memory fake
// Metal runtime (csrc/engine/metal_fake_runtime.*) and installs it into
// _core's Metal binding through the private capsule _core._metal_test_hooks;
// _core itself links no fake. Not part of the public API.
//
//   install_fake_metal_runtime() -> FakeMetalRuntime   controller of the fake
//   remove_metal_runtime()                             no runtime again
//   dlpack_capsule(...), dlpack_deleted(), ...         a counting DLPack
//                                                      producer (dlpack_producer.cpp)
#include <cstring>
#include <memory>
#include <new>

#include "dlpack_producer.hpp"
#include "metal/fake_runtime.hpp"
#include "metal_test_hooks.hpp"
#include "util/ref.hpp"
#include "util/scopes.hpp"
#include "util/type_object.hpp"

namespace swtesting {

namespace {

namespace M = sw::metal;
using swpy::Ref;

// _core's hook table, looked up once at import (module lifetime: _core is
// never unloaded while _testing, which imports it, is alive).
const swpy::MetalTestHooks* g_hooks = nullptr;

struct FakeObject {
  PyObject_HEAD
  std::shared_ptr<M::FakeRuntime> rt;
};

FakeObject* as_fake(PyObject* o) { return reinterpret_cast<FakeObject*>(o); }

PyTypeObject Fake_Type = swpy::static_type("strideweave._testing.FakeMetalRuntime", sizeof(FakeObject));

void Fake_dealloc(PyObject* self) {
  as_fake(self)->rt.~shared_ptr();
  Py_TYPE(self)->tp_free(self);
}

PyObject* Fake_log(PyObject* self, PyObject*) {
  auto entries = as_fake(self)->rt->log();
  Ref list = Ref::steal(PyList_New(0));
  if (!list) return nullptr;
  for (const auto& e : entries) {
    Ref t = Ref::steal(Py_BuildValue("(sKKnO)", M::FakeRuntime::call_name(e.call),
                                     static_cast<unsigned long long>(e.dst), static_cast<unsigned long long>(e.src),
                                     static_cast<Py_ssize_t>(e.bytes), e.ok ? Py_True : Py_False));
    if (!t || PyList_Append(list.get(), t.get()) < 0) return nullptr;
  }
  return list.release();
}

PyObject* Fake_clear_log(PyObject* self, PyObject*) {
  as_fake(self)->rt->clear_log();
  Py_RETURN_NONE;
}

PyObject* Fake_fail(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"step", "skip", nullptr};
  const char* step;
  int skip = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$i:fail", const_cast<char**>(kw), &step, &skip)) return nullptr;
  using C = M::FakeRuntime::Call;
  for (C c : {C::Allocate, C::CopyToDevice, C::CopyToHost, C::CopyDevice, C::Synchronize}) {
    if (std::strcmp(step, M::FakeRuntime::call_name(c)) == 0) {
      as_fake(self)->rt->fail_next(c, skip < 0 ? 0 : skip);
      Py_RETURN_NONE;
    }
  }
  PyErr_Format(PyExc_ValueError,
               "unknown step %s; use allocate, copy_to_device, copy_to_host, copy_device or synchronize", step);
  return nullptr;
}

PyObject* Fake_hold(PyObject* self, PyObject* args) {
  int held = 1;
  if (!PyArg_ParseTuple(args, "|p:hold_synchronize", &held)) return nullptr;
  as_fake(self)->rt->hold_synchronize(held != 0);
  Py_RETURN_NONE;
}

PyObject* Fake_wait_synchronizing(PyObject* self, PyObject* arg) {
  double timeout = PyFloat_AsDouble(arg);
  if (timeout == -1.0 && PyErr_Occurred()) return nullptr;
  if (!(timeout >= 0.0) || timeout > 86400.0) {
    PyErr_SetString(PyExc_ValueError, "wait_synchronizing() timeout must be between 0 and 86400 seconds");
    return nullptr;
  }
  auto rt = as_fake(self)->rt;
  bool r;
  {
    swpy::GilRelease nogil;
    r = rt->wait_synchronizing(static_cast<int>(timeout * 1000));
  }
  return PyBool_FromLong(r);
}

PyObject* Fake_live_buffers(PyObject* self, PyObject*) { return PyLong_FromSize_t(as_fake(self)->rt->live_buffers()); }
PyObject* Fake_pending(PyObject* self, PyObject*) { return PyLong_FromSize_t(as_fake(self)->rt->pending()); }
PyObject* Fake_unsafe_frees(PyObject* self, PyObject*) { return PyLong_FromSize_t(as_fake(self)->rt->unsafe_frees()); }

PyObject* Fake_buffer_id(PyObject*, PyObject* arg) {
  M::BufferId id = 0;
  if (g_hooks->buffer_id(arg, &id) < 0) return nullptr;
  return PyLong_FromUnsignedLongLong(id);
}

PyMethodDef Fake_methods[] = {
    {"log", Fake_log, METH_NOARGS,
     "Calls so far: (step, dst_buffer, src_buffer, bytes, ok) tuples; synchronize entries are logged on completion "
     "with the number of commands they completed in place of bytes."},
    {"clear_log", Fake_clear_log, METH_NOARGS, "Forget the logged calls."},
    {"fail", swpy::method_cast(Fake_fail), METH_VARARGS | METH_KEYWORDS,
     "fail(step, *, skip=0): the (skip+1)-th next call of step raises a device error."},
    {"hold_synchronize", Fake_hold, METH_VARARGS, "hold_synchronize(held=True): block synchronize() while held."},
    {"wait_synchronizing", Fake_wait_synchronizing, METH_O,
     "wait_synchronizing(timeout): True once a synchronize() waits on the hold."},
    {"live_buffers", Fake_live_buffers, METH_NOARGS, "Number of allocated, not yet freed buffers."},
    {"pending", Fake_pending, METH_NOARGS, "Enqueued commands not yet completed."},
    {"unsafe_frees", Fake_unsafe_frees, METH_NOARGS, "Frees of a buffer that pending work still used."},
    {"buffer_id", Fake_buffer_id, METH_O, "The device buffer of a Metal carrier (0: none)."},
    {nullptr, nullptr, 0, nullptr}};

PyObject* install_fake(PyObject*, PyObject*) {
  Ref self = Ref::steal(Fake_Type.tp_alloc(&Fake_Type, 0));
  if (!self) return nullptr;
  new (&as_fake(self.get())->rt) std::shared_ptr<M::FakeRuntime>();
  try {
    as_fake(self.get())->rt = std::make_shared<M::FakeRuntime>();
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  g_hooks->install_runtime(as_fake(self.get())->rt);
  return self.release();
}

PyObject* remove_runtime(PyObject*, PyObject*) {
  g_hooks->install_runtime(nullptr);
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"install_fake_metal_runtime", install_fake, METH_NOARGS,
     "Install a host-memory fake Metal runtime into strideweave and return its controller."},
    {"remove_metal_runtime", remove_runtime, METH_NOARGS,
     "Remove the installed Metal runtime; existing carriers keep theirs."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef testing_module = {
    PyModuleDef_HEAD_INIT, "strideweave._testing",
    "Test doubles for StrideWeave's own tests (not public API): the fake Metal runtime and a counting DLPack "
    "producer.", -1, module_methods,
    nullptr, nullptr, nullptr, nullptr};

// Finds _core's hook table; ImportError when it is missing or of another
// version (a stale build).
int load_hooks() {
  Ref core = Ref::steal(PyImport_ImportModule("strideweave._core"));
  if (!core) return -1;
  Ref capsule = Ref::steal(PyObject_GetAttrString(core.get(), "_metal_test_hooks"));
  if (!capsule) return -1;
  auto* hooks = static_cast<const swpy::MetalTestHooks*>(PyCapsule_GetPointer(capsule.get(), swpy::kMetalTestHooksCapsule));
  if (!hooks) return -1;
  if (hooks->version != swpy::kMetalTestHooksVersion) {
    PyErr_Format(PyExc_ImportError, "strideweave._testing expects Metal test hooks version %u, _core has %u",
                 swpy::kMetalTestHooksVersion, hooks->version);
    return -1;
  }
  g_hooks = hooks;
  return 0;
}

}  // namespace

}  // namespace swtesting

PyMODINIT_FUNC PyInit__testing(void) {
  using namespace swtesting;
  if (load_hooks() < 0) return nullptr;
  Fake_Type.tp_flags = Py_TPFLAGS_DEFAULT;
  Fake_Type.tp_doc = "Controller of the fake Metal runtime (tests only).";
  Fake_Type.tp_dealloc = Fake_dealloc;
  Fake_Type.tp_methods = Fake_methods;
  Fake_Type.tp_new = nullptr;  // made only by install_fake_metal_runtime()
  if (PyType_Ready(&Fake_Type) < 0) return nullptr;
  PyObject* m = PyModule_Create(&testing_module);
  if (!m) return nullptr;
  if (PyModule_AddObjectRef(m, "FakeMetalRuntime", reinterpret_cast<PyObject*>(&Fake_Type)) < 0 ||
      PyModule_AddFunctions(m, dlpack_producer_functions) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}

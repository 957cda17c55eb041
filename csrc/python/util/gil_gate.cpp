#include "util/gil_gate.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "util/compat.hpp"
#include "util/ref.hpp"

namespace swpy::gil_gate {

namespace {

// Threads between their check of the gate and holding the GIL. Each side of
// the handshake writes its own variable then reads the other's (sequentially
// consistent), so either the arriving thread sees the gate shut or close()
// sees the thread and waits for it.
std::atomic<long> entering{0};
std::atomic<bool> shut{false};
std::atomic<PyThreadState*> closer{nullptr};
std::atomic<unsigned long> main_ident{0};

bool shut_for(PyThreadState* mine) {
  if (shut.load()) return mine == nullptr || mine != closer.load();
  if (compat::is_finalizing()) {
    const unsigned long main = main_ident.load();  // 0: never recorded, hold no one back
    return main != 0 && PyThread_get_thread_ident() != main;
  }
  return false;
}

bool enter(PyThreadState* mine) {
  entering.fetch_add(1);
  if (!shut_for(mine)) return true;
  entering.fetch_sub(1);
  return false;
}

[[noreturn]] void park() noexcept {
  // Nothing here touches Python; the process ends around this thread.
  for (;;) pause();
}

}  // namespace

void init() {
  main_ident.store(PyThread_get_thread_ident());
  Ref threading = Ref::steal(PyImport_ImportModule("threading"));
  Ref main = threading ? Ref::steal(PyObject_CallMethod(threading.get(), "main_thread", nullptr)) : Ref();
  Ref ident = main ? Ref::steal(PyObject_GetAttrString(main.get(), "ident")) : Ref();
  const unsigned long id = ident ? PyLong_AsUnsignedLong(ident.get()) : 0;
  if (PyErr_Occurred()) PyErr_Clear();  // keep the importing thread's ident
  else if (id != 0) main_ident.store(id);
}

void restore_thread(PyThreadState* ts) noexcept {
  if (!enter(ts)) park();
  PyEval_RestoreThread(ts);
  entering.fetch_sub(1);
}

bool ensure(PyGILState_STATE* out) noexcept {
  if (!Py_IsInitialized()) return false;
  if (PyGILState_Check()) {  // held already: nothing to wait for
    *out = PyGILState_Ensure();
    return true;
  }
  if (!enter(PyGILState_GetThisThreadState())) return false;
  *out = PyGILState_Ensure();
  entering.fetch_sub(1);
  return true;
}

void close(double limit_s) {
  closer.store(PyThreadState_Get());
  shut.store(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (entering.load() != 0 && std::chrono::steady_clock::now() < deadline) {
    PyThreadState* ts = PyEval_SaveThread();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    PyEval_RestoreThread(ts);
  }
}

bool closed() noexcept { return shut.load(); }

void after_fork_child() {
  // The child's one thread is the forking one, holding the GIL: nobody is
  // on the way, and it is the child's main thread (and its closer, if the
  // gate was already shut).
  entering.store(0);
  main_ident.store(PyThread_get_thread_ident());
  if (shut.load()) closer.store(PyThreadState_Get());
}

}  // namespace swpy::gil_gate

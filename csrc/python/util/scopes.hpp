// RAII scopes for the state the binding layer toggles around user code:
// grad mode, owner access to a claimed carrier, and the GIL.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "util/errors.hpp"
#include "util/gil_gate.hpp"

namespace swpy {

// Defined in the autograd binding (thread-local grad mode).
bool grad_enabled();
void set_grad_enabled(bool on);

// Sets grad mode for the scope and restores the previous mode on exit.
class GradMode {
 public:
  explicit GradMode(bool on) : prev_(grad_enabled()) { set_grad_enabled(on); }
  GradMode(const GradMode&) = delete;
  GradMode& operator=(const GradMode&) = delete;
  ~GradMode() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};

// No graph recording inside the scope (prepare/submit/_copy hooks, backward).
class NoGrad : public GradMode {
 public:
  NoGrad() : GradMode(false) {}
};

// Defined with the carrier base: re-entrant, thread-bound owner access.
int carrier_begin_access(PyObject* c, int64_t token);
int carrier_end_access(PyObject* c, int64_t token);

// Owner access to carrier c through token for the scope. Check ok() after
// construction (-1 / exception set when the token is not the owner's). The
// end of the scope keeps any pending exception.
class OwnerAccess {
 public:
  OwnerAccess(PyObject* c, int64_t token) : c_(c), token_(token) {
    ok_ = c_ && token_ && carrier_begin_access(c_, token_) == 0;
  }
  OwnerAccess(const OwnerAccess&) = delete;
  OwnerAccess& operator=(const OwnerAccess&) = delete;
  ~OwnerAccess() {
    if (!ok_) return;
    ErrorGuard keep;
    carrier_end_access(c_, token_);
  }
  bool ok() const { return ok_; }

 private:
  PyObject* c_;
  int64_t token_;
  bool ok_ = false;
};

// Releases the GIL for the scope (Py_BEGIN/END_ALLOW_THREADS as an object).
// Taking it back goes through the exit gate (util/gil_gate.hpp): once the
// process is exiting, a daemon thread waits here for the end instead of
// being unwound through this noexcept destructor by CPython.
class GilRelease {
 public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;
  ~GilRelease() { gil_gate::restore_thread(state_); }

 private:
  PyThreadState* state_;
};

}  // namespace swpy

// Ref: an owned (strong) reference that is released when it goes out of
// scope, so an early return cannot leak. Everything here needs the GIL.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <utility>

namespace swpy {

class Ref {
 public:
  Ref() = default;
  // Takes ownership of a new reference (may be NULL).
  static Ref steal(PyObject* o) { return Ref(o); }
  // Takes a new reference to a borrowed one (may be NULL).
  static Ref borrow(PyObject* o) { return Ref(Py_XNewRef(o)); }

  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref& operator=(Ref&& o) noexcept {
    if (this != &o) reset(std::exchange(o.p_, nullptr));
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }

  PyObject* get() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // Hands the reference to the caller (for return values and stealing APIs).
  [[nodiscard]] PyObject* release() { return std::exchange(p_, nullptr); }
  // Replaces the held reference with o (stolen).
  void reset(PyObject* o = nullptr) {
    PyObject* old = std::exchange(p_, o);
    Py_XDECREF(old);
  }
  // A new reference to the held object (NULL stays NULL).
  PyObject* new_ref() const { return Py_XNewRef(p_); }

 private:
  explicit Ref(PyObject* o) : p_(o) {}
  PyObject* p_ = nullptr;
};

}  // namespace swpy

// Error handling shared by every binding file.
//
// House style: a function returning PyObject* returns a new reference or
// NULL with an exception set; one returning int returns 0 (or a positive
// value) or -1 with an exception set. Cleanup that may run Python code while
// an exception is pending (DECREFs, relinquishing ownership, profiling
// records) is wrapped in an ErrorGuard, which keeps the pending exception
// exactly as it was. Engine code throws C++ exceptions; they are caught at
// the binding boundary and turned into Python exceptions by
// raise_engine_exception(), never allowed to unwind through CPython.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "util/compat.hpp"

namespace swpy {

// Saves the pending exception (if any) on construction and restores it on
// destruction; whatever the guarded code raises in between is discarded.
class ErrorGuard {
 public:
  ErrorGuard() : saved_(compat::take_raised()) {}
  ErrorGuard(const ErrorGuard&) = delete;
  ErrorGuard& operator=(const ErrorGuard&) = delete;
  ~ErrorGuard() {
    if (PyErr_Occurred()) PyErr_Clear();
    compat::restore_raised(saved_);
  }

 private:
  PyObject* saved_;
};

// Thrown through engine code by a callback of ours that called Python and
// failed (a base directory from tempfile.gettempdir(), say): the Python
// exception is already set, and the translator leaves it as it is.
struct PythonError {};

// Sets the Python exception matching a caught engine exception:
// std::bad_alloc -> MemoryError, std::system_error -> OSError(errno, what),
// std::invalid_argument / std::out_of_range / std::length_error ->
// ValueError, std::overflow_error -> OverflowError, PythonError -> the
// exception already set, anything else -> RuntimeError. Call only inside a
// catch block (it rethrows to inspect). Returns -1 so callers can
// `return raise_engine_exception();`.
int raise_engine_exception();
// Same for a captured exception_ptr (from a worker thread).
int raise_engine_exception(std::exception_ptr e);

// The one way binding code runs engine code: engine_call(f) runs f() and
// converts whatever it throws (raise_engine_exception). 0 / -1.
template <class F>
int engine_call(F&& f) {
  try {
    f();
    return 0;
  } catch (...) {
    return raise_engine_exception();
  }
}

// engine_call for an engine check whose refusal (std::invalid_argument) the
// caller words itself, naming its operands: 0 passed; 1 refused, the reason
// in *why and nothing raised; -1 another error, raised.
template <class F>
int engine_check(std::string* why, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::invalid_argument& e) {
    return engine_call([&] { *why = e.what(); }) < 0 ? -1 : 1;
  } catch (...) {
    return raise_engine_exception();
  }
}

// Runs engine code f() where no Python exception can be raised (a worker
// thread, a GilRelease scope) and returns what it threw, or null, for
// raise_engine_exception(e) once the GIL is held again.
template <class F>
std::exception_ptr engine_capture(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// engine_call for file-system work on path: a std::system_error becomes
// the OSError subclass of its errno naming the path (FileNotFoundError:
// [Errno 2] No such file or directory: 'path'); an sw::PathError names the
// path it failed at; an empty path names none. raise_engine_exception_at is
// its translator (call only inside a catch block). 0 / -1.
int raise_engine_exception_at(const std::string& path);
template <class F>
int engine_call_at(const std::string& path, F&& f) {
  try {
    f();
    return 0;
  } catch (...) {
    return raise_engine_exception_at(path);
  }
}

// engine_call for an f that returns a new reference (or NULL with an
// exception set): its result, or NULL when it throws.
template <class F>
PyObject* engine_new(F&& f) {
  try {
    return f();
  } catch (...) {
    raise_engine_exception();
    return nullptr;
  }
}

// engine_call whose errors say who failed (who + what: "add(): ", "relu
// backward: ", "TiledEvictable: "): the library's own errors read
// "add(): <message>"; anything user code raised stays the same object with
// the note "in add()"; a MemoryError is left as it is. Two parts so callers
// need not format a prefix on the success path. add_error_context does the
// same for an exception already pending (returns -1). engine_call_in: 0 / -1.
int add_error_context(const char* who, const char* what = "");
template <class F>
int engine_call_in(const char* who, const char* what, F&& f) {
  try {
    f();
    return 0;
  } catch (...) {
    raise_engine_exception();
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    return add_error_context(who, what);
  }
}

// Says where the pending exception happened. A plain built-in exception
// that C code raised just now (the binding's own or CPython's: a built-in
// class, one str argument, no traceback) is raised again with prefix and
// suffix around its message, as this library's messages read ("add(): ...",
// "... (at index (1,) of data with shape (2,))"). Any other exception (one
// that user code raised, or whose class takes other arguments: an OSError's
// errno, a UnicodeDecodeError's five) stays the very same object, type,
// arguments, traceback and chain, and gets note as a PEP 678 note.
// SystemExit, KeyboardInterrupt and every other BaseException that is not an
// Exception pass through untouched. Returns -1 (the exception stays pending).
// add_error_context(who, what) is locate_error(who + what, "", "in " + who).
int locate_error(const char* prefix, const char* suffix, const char* note);

// A type's short name (the part of tp_name after the last dot), for
// messages; the public replacement for the private _PyType_Name.
const char* type_name(PyTypeObject* t);
inline const char* type_name(PyObject* o) { return type_name(Py_TYPE(o)); }
// "an" before a name that starts with a vowel ("an Evictable carrier",
// "an Int32 tensor"), else "a".
inline const char* article(const char* name) {
  switch (name[0]) {
    case 'A': case 'E': case 'I': case 'O': case 'U': case 'a': case 'e': case 'i': case 'o': case 'u':
      return "an";
    default:
      return "a";
  }
}
// Short name of a class object (o must be a type).
inline const char* class_name(PyObject* cls) { return type_name(reinterpret_cast<PyTypeObject*>(cls)); }

}  // namespace swpy

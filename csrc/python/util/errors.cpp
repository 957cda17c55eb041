#include "util/errors.hpp"

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "files/store.hpp"
#include "util/ref.hpp"

namespace swpy {

namespace {

// The OSError subclass of errno err naming path (none when empty).
void raise_os_error(int err, const std::string& path) {
  errno = err;
  if (path.empty())
    PyErr_SetFromErrno(PyExc_OSError);
  else
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
}

// The translation; path is engine_call_at's (NULL for engine_call).
int translate(std::exception_ptr e, const std::string* path) {
  try {
    std::rethrow_exception(e);
  } catch (const PythonError&) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a Python callback failed without an exception");
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::system_error& err) {
    if (path) {
      // A PathError names the path it failed at; any other error the caller's.
      const auto* at = dynamic_cast<const sw::PathError*>(&err);
      raise_os_error(err.code().value(), at ? at->path() : *path);
    } else {
      // OSError(errno, what) picks the errno's subclass (FileNotFoundError...).
      Ref exc = Ref::steal(PyObject_CallFunction(PyExc_OSError, "is", err.code().value(), err.what()));
      if (exc) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.get())), exc.get());
    }
  } catch (const std::overflow_error& err) {
    PyErr_SetString(PyExc_OverflowError, err.what());
  } catch (const std::invalid_argument& err) {
    PyErr_SetString(PyExc_ValueError, err.what());
  } catch (const std::out_of_range& err) {
    PyErr_SetString(PyExc_ValueError, err.what());
  } catch (const std::length_error& err) {
    PyErr_SetString(PyExc_ValueError, err.what());
  } catch (const std::exception& err) {
    PyErr_SetString(PyExc_RuntimeError, err.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unexpected engine error");
  }
  return -1;
}

}  // namespace

int raise_engine_exception() { return translate(std::current_exception(), nullptr); }
int raise_engine_exception(std::exception_ptr e) { return translate(e, nullptr); }
int raise_engine_exception_at(const std::string& path) { return translate(std::current_exception(), &path); }

namespace {

// The message of a built-in exception (not a user's subclass) that C code
// raised with one str and that passed through no Python frame: rebuilding it
// with a longer message loses nothing. Else NULL. Borrowed.
PyObject* own_message(PyObject* exc) {
  if (PyType_HasFeature(Py_TYPE(exc), Py_TPFLAGS_HEAPTYPE)) return nullptr;
  if (Ref::steal(PyException_GetTraceback(exc))) return nullptr;
  PyObject* args = reinterpret_cast<PyBaseExceptionObject*>(exc)->args;
  if (!args || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) != 1) return nullptr;
  PyObject* msg = PyTuple_GET_ITEM(args, 0);
  return PyUnicode_Check(msg) ? msg : nullptr;
}

}  // namespace

int locate_error(const char* prefix, const char* suffix, const char* note) {
  Ref exc = Ref::steal(compat::take_raised());
  if (!exc) return -1;
  if (!PyObject_TypeCheck(exc.get(), reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
    compat::restore_raised(exc.release());
    return -1;
  }
  if (PyObject* msg = own_message(exc.get())) {
    PyErr_Format(reinterpret_cast<PyObject*>(Py_TYPE(exc.get())), "%s%U%s", prefix, msg, suffix);
    return -1;
  }
  // A note that cannot be added (no memory, a user's __notes__ that is not
  // a list) is dropped: the original exception matters more.
  Ref text = Ref::steal(PyUnicode_FromString(note));
  if (!text || compat::add_note(exc.get(), text.get()) < 0) PyErr_Clear();
  compat::restore_raised(exc.release());
  return -1;
}

int add_error_context(const char* who, const char* what) {
  std::string at = std::string(who) + what;
  const std::string prefix = at;
  while (!at.empty() && (at.back() == ' ' || at.back() == ':')) at.pop_back();  // "add(): " -> "add()"
  return locate_error(prefix.c_str(), "", ("in " + at).c_str());
}

const char* type_name(PyTypeObject* t) {
  const char* s = t->tp_name;
  const char* dot = std::strrchr(s, '.');
  return dot ? dot + 1 : s;
}

}  // namespace swpy

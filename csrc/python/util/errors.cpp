#include "util/errors.hpp"

#include <cstring>
#include <new>
#include <stdexcept>
#include <system_error>

namespace swpy {

int raise_engine_exception() { return raise_engine_exception(std::current_exception()); }

int raise_engine_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::system_error& err) {
    PyObject* exc = PyObject_CallFunction(PyExc_OSError, "is", err.code().value(), err.what());
    if (exc) {
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
      Py_DECREF(exc);
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

const char* type_name(PyTypeObject* t) {
  const char* s = t->tp_name;
  const char* dot = std::strrchr(s, '.');
  return dot ? dot + 1 : s;
}

}  // namespace swpy

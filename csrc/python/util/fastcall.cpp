#include "util/fastcall.hpp"

namespace swpy::fastcall_detail {

namespace {

const char* plural(Py_ssize_t n) { return n == 1 ? "" : "s"; }

// "positional argument" unless every parameter is positional-only (then
// there is no other kind to tell them from: "argument").
const char* kind(const Signature& sig) {
  return sig.positional_only == sig.count ? "argument" : "positional argument";
}

// The parameter named key, or -1.
int param_of(const Signature& sig, PyObject* key) {
  for (int i = 0; i < sig.count; ++i)
    if (PyUnicode_CompareWithASCIIString(key, sig.params[i]) == 0) return i;
  return -1;
}

}  // namespace

int too_many_positional(const Signature& sig, Py_ssize_t nargs) {
  if (sig.positional == 0)
    PyErr_Format(PyExc_TypeError, "%s() takes no positional arguments (%zd given)", sig.name, nargs);
  else
    PyErr_Format(PyExc_TypeError, "%s() takes %s %d %s%s (%zd given)", sig.name,
                 sig.positional == sig.required ? "exactly" : "at most", sig.positional, kind(sig),
                 plural(sig.positional), nargs);
  return -1;
}

int missing(const Signature& sig, int param, Py_ssize_t nargs) {
  if (param < sig.positional_only) {
    const int least = sig.required < sig.positional_only ? sig.required : sig.positional_only;
    PyErr_Format(PyExc_TypeError, "%s() takes %s %d %s%s (%zd given)", sig.name,
                 least == sig.positional ? "exactly" : "at least", least, kind(sig), plural(least), nargs);
  } else if (param < sig.positional) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", sig.name, sig.params[param],
                 param + 1);
  } else {
    PyErr_Format(PyExc_TypeError, "%s() missing required keyword-only argument: '%s'", sig.name, sig.params[param]);
  }
  return -1;
}

int given_twice(const Signature& sig, int param) {
  PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", sig.name, sig.params[param]);
  return -1;
}

int bind_new_keywords(const Signature& sig, KeywordCache& cache, PyObject* const* values, PyObject* kwnames,
                      PyObject** out) {
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  int8_t params[Signature::kMaxParams];
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    if (!PyUnicode_Check(key)) {
      PyErr_Format(PyExc_TypeError, "%s() keywords must be strings", sig.name);
      return -1;
    }
    const int p = param_of(sig, key);
    if (p < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", sig.name, key);
      return -1;
    }
    if (p < sig.positional_only) {
      PyErr_Format(PyExc_TypeError, "%s() got some positional-only arguments passed as keyword arguments: '%U'",
                   sig.name, key);
      return -1;
    }
    if (out[p]) return given_twice(sig, p);
    out[p] = values[k];
    if (k < Signature::kMaxParams) params[k] = static_cast<int8_t>(p);
  }
  // Every name bound, each to its own parameter: remember the tuple (at
  // most one name per parameter, so it fits).
  if (n <= Signature::kMaxParams) {
    Py_XSETREF(cache.kwnames, Py_NewRef(kwnames));
    for (Py_ssize_t k = 0; k < n; ++k) cache.param[k] = params[k];
  }
  return 0;
}

}  // namespace swpy::fastcall_detail

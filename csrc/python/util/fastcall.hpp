// The one argument parser of the METH_FASTCALL | METH_KEYWORDS entry points
// (what Argument Clinic's _PyArg_UnpackKeywords is to CPython's modules):
//
//   constexpr Signature kSig{"from_dlpack", {"x", "device", "copy"}, 1, 1, 1};
//   PyObject* a[3];
//   if (parse_args(kSig, module_state.keywords.from_dlpack, args, nargsf, kwnames, a) < 0) return nullptr;
//
// a[i] is then the argument of parameter i (borrowed) or NULL when it was
// not given. A call site passes the same keyword-name tuple every time (a
// code object's constant, np.from_dlpack's static tuple), so the last tuple
// that bound is remembered with the parameter of each name (KeywordCache,
// module state) and binds by position: a few pointer compares per call.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <initializer_list>

namespace swpy {

// A function's parameters in order: the first `positional` may be passed by
// position (of them the first `positional_only` only by position), the
// others only by keyword; the first `required` must be given.
struct Signature {
  static constexpr int kMaxParams = 6;
  constexpr Signature(const char* fn, std::initializer_list<const char*> names, int positional_, int positional_only_ = 0,
                      int required_ = 0)
      : name(fn), count(static_cast<int>(names.size())), positional(positional_),
        positional_only(positional_only_), required(required_) {
    // More parameters than kMaxParams, or counts that do not nest, make the
    // constant expression fail to compile (throw is not constant).
    if (count > kMaxParams || positional > count || positional_only > positional || required > count) throw 0;
    int i = 0;
    for (const char* n : names) params[i++] = n;
  }
  const char* name;  // messages read "name() ..."
  const char* params[kMaxParams] = {};
  int count;
  int positional;
  int positional_only;
  int required;
};

// The keyword-name tuple a Signature last bound (a strong reference, so its
// address can name no other tuple) and the parameter each name binds.
struct KeywordCache {
  PyObject* kwnames = nullptr;
  int8_t param[Signature::kMaxParams] = {};
};

namespace fastcall_detail {
// The slow paths, out of line: TypeError with CPython's wording, or binding
// a keyword-name tuple not seen last (then remembered). -1 / 0.
int too_many_positional(const Signature& sig, Py_ssize_t nargs);
int missing(const Signature& sig, int param, Py_ssize_t nargs);
int given_twice(const Signature& sig, int param);
int bind_new_keywords(const Signature& sig, KeywordCache& cache, PyObject* const* values, PyObject* kwnames,
                      PyObject** out);
}  // namespace fastcall_detail

// Binds a vectorcall's arguments to sig: out (sig.count entries) receives
// each parameter's argument, borrowed, or NULL. 0 / -1 with TypeError: too
// many positional arguments, an unknown or non-str keyword, a positional-only
// parameter by keyword, one given twice, a required one missing.
inline int parse_args(const Signature& sig, KeywordCache& cache, PyObject* const* args, size_t nargsf,
                      PyObject* kwnames, PyObject** out) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs > sig.positional) return fastcall_detail::too_many_positional(sig, nargs);
  for (int i = 0; i < sig.count; ++i) out[i] = i < nargs ? args[i] : nullptr;
  if (kwnames) {
    if (kwnames == cache.kwnames) {
      const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
      for (Py_ssize_t k = 0; k < n; ++k) {
        const int p = cache.param[k];
        if (out[p]) return fastcall_detail::given_twice(sig, p);
        out[p] = args[nargs + k];
      }
    } else if (fastcall_detail::bind_new_keywords(sig, cache, args + nargs, kwnames, out) < 0) {
      return -1;
    }
  }
  for (int i = static_cast<int>(nargs); i < sig.required; ++i)
    if (!out[i]) return fastcall_detail::missing(sig, i, nargs);
  return 0;
}

// parse_args for a METH_FASTCALL function without keywords (every parameter
// positional-only).
inline int parse_positional(const Signature& sig, PyObject* const* args, Py_ssize_t nargs, PyObject** out) {
  KeywordCache unused;  // no keyword names to remember
  return parse_args(sig, unused, args, static_cast<size_t>(nargs), nullptr, out);
}

}  // namespace swpy

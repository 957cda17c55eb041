// _core._tiled_gather: the span copies of one TiledEvictable request as one
// native call with the GIL released (the engine's run_gather_captured deals
// them to a few threads). Parses and checks the copies, claims the
// unowned carriers for the call, and raises what the engine threw.
#include <exception>
#include <vector>

#include "carrier_object.hpp"
#include "module.hpp"
#include "move/internal.hpp"
#include "tiled_gather.hpp"
#include "util/errors.hpp"
#include "util/ref.hpp"
#include "util/scopes.hpp"
#include "util/args.hpp"

namespace swpy {

namespace {

// Claims taken for the call, given back on every path.
class GatherClaims {
 public:
  GatherClaims() = default;
  GatherClaims(const GatherClaims&) = delete;
  GatherClaims& operator=(const GatherClaims&) = delete;
  ~GatherClaims() {
    ErrorGuard keep;
    for (auto& [c, token] : claims_)
      if (carrier_relinquish(c, token) < 0) PyErr_Clear();
  }

  // An unowned carrier is claimed (nobody can release or write it while
  // the GIL is released); an owned one needs this thread's owner access
  // (its owner, a TiledEvictable request, keeps it unchanged). 0 / -1.
  int take(PyObject* c) {
    for (auto& [seen, token] : claims_)
      if (seen == c) return 0;
    for (PyObject* seen : accessed_)
      if (seen == c) return 0;
    const sw::Ownership& own = as_carrier(c)->ownership;
    if (own.is_owned()) {
      if (!own.has_access(current_thread_id())) {
        PyErr_Format(PyExc_RuntimeError,
                     "_tiled_gather(): %s carrier is owned by another carrier or a pending move; it can be copied "
                     "only with owner access",
                     type_name(c));
        return -1;
      }
      accessed_.push_back(c);
      return 0;
    }
    const int64_t token = carrier_claim(c);
    if (!token) return -1;
    claims_.emplace_back(c, token);
    return 0;
  }

 private:
  std::vector<std::pair<PyObject*, int64_t>> claims_;
  std::vector<PyObject*> accessed_;
};

// The carrier at index i of a copy tuple: a live Carrier. Borrowed.
PyObject* carrier_item(PyObject* tup, Py_ssize_t i, const char* what) {
  PyObject* c = PyTuple_GET_ITEM(tup, i);
  if (!is_carrier(c)) {
    PyErr_Format(PyExc_TypeError, "_tiled_gather(): %s must be a Carrier, not %s", what, type_name(c));
    return nullptr;
  }
  if (carrier_is_released(c)) {
    PyErr_Format(PyExc_RuntimeError, "_tiled_gather(): %s %s carrier is released", what, type_name(c));
    return nullptr;
  }
  return c;
}

int span_in(PyObject* c, Py_ssize_t first, Py_ssize_t count, const char* what) {
  const Py_ssize_t size = carrier_size(c);
  if (size < 0) return -1;
  if (first < 0 || count < 0 || first > size || count > size - first) {
    PyErr_Format(PyExc_ValueError, "_tiled_gather(): %s span [%zd, %zd + %zd) exceeds its %zd slots", what, first,
                 first, count, size);
    return -1;
  }
  return 0;
}

PyObject* tiled_gather(PyObject*, PyObject* args) {
  PyObject* seq;
  int ways = 0;
  if (!PyArg_ParseTuple(args, "O|i:_tiled_gather", &seq, &ways)) return nullptr;
  Ref items = Ref::steal(PySequence_Fast(seq, "_tiled_gather(): copies must be a sequence of "
                                              "(src, src_first, dst, dst_first, count) tuples"));
  if (!items) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  GatherClaims claims;
  std::vector<sw::CopyPlan> plans;
  plans.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* tup = PySequence_Fast_GET_ITEM(items.get(), i);
    if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) != 5) {
      PyErr_Format(PyExc_TypeError,
                   "_tiled_gather(): copy %zd must be a (src, src_first, dst, dst_first, count) tuple, not %s", i,
                   type_name(tup));
      return nullptr;
    }
    PyObject* src = carrier_item(tup, 0, "src");
    PyObject* dst = src ? carrier_item(tup, 2, "dst") : nullptr;
    if (!dst) return nullptr;
    Py_ssize_t sf, df, count;
    if (!PyArg_ParseTuple(tup, "OO&OO&O&:_tiled_gather", &src, offset_arg, &sf, &dst, offset_arg, &df, count_arg,
                          &count))
      return nullptr;
    if (span_in(src, sf, count, "src") < 0 || span_in(dst, df, count, "dst") < 0) return nullptr;
    Ref sd = Ref::steal(carrier_dtype(src));
    Ref dd = sd ? Ref::steal(carrier_dtype(dst)) : Ref();
    if (!dd) return nullptr;
    // A span copy moves bits: both sides must hold one dtype, not merely one
    // item size.
    sw::CopyPlan plan = sd.get() == dd.get() ? move_internal::plan_span(src, sf, dst, df, count) : sw::CopyPlan();
    if (!plan.native()) {
      PyErr_Format(PyExc_TypeError, "_tiled_gather(): no native span copy from %s to %s (native CPU and FileBacked "
                   "carriers of one dtype only)", type_name(src), type_name(dst));
      return nullptr;
    }
    if (claims.take(src) < 0 || claims.take(dst) < 0) return nullptr;
    plans.push_back(std::move(plan));
  }
  std::exception_ptr failure;
  {
    GilRelease unlocked;
    failure = sw::run_gather_captured(plans, ways);
  }
  if (failure) {
    raise_engine_exception(failure);
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef gather_methods[] = {
    {"_tiled_gather", tiled_gather, METH_VARARGS,
     "_tiled_gather(copies, ways=0, /)\n--\n\nPrivate (TiledEvictable): runs every span copy (src, src_first, dst, "
     "dst_first, count) between native CPU / FileBacked carriers with the GIL released, dealt to up to `ways` "
     "threads (0: the executor's cores). Unowned carriers are claimed for the call; owned ones need this thread's "
     "owner access, and their owner keeps the spans unchanged until it returns."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int tiled_gather_module_init(PyObject* module) { return PyModule_AddFunctions(module, gather_methods); }

}  // namespace swpy

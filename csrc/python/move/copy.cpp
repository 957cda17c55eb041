// Copy planning as the binding sees it: the engine plans and runs the copy
// (transfer/copy_plan); this file only describes each carrier to it (host
// pointer, file storage, item size), runs the plan, and falls back to a
// value-by-value copy through the carriers when there is no native plan.
#include <exception>

#include "move/internal.hpp"
#include "dtype_object.hpp"
#include "carrier_object.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/scopes.hpp"
#include "transfer/parallel_copy.hpp"
#include "runtime/executor.hpp"

namespace swpy::move_internal {

namespace {

// A carrier's storage dtype (DTypeCode::Any when it has none: a hook failed).
sw::DTypeCode carrier_code(PyObject* c) {
  Ref d = Ref::steal(carrier_dtype(c));
  if (!d) {
    PyErr_Clear();
    return sw::DTypeCode::Any;
  }
  return dtype_code(d.get());
}

// A carrier whose Python class overrides a slot hook is copied through its
// hooks, never behind their back.
// (An exact built-in class cannot override its own hooks: no lookup.)
bool no_value_hooks(PyObject* c) {
  if (Py_TYPE(c) == &CPU_Type || Py_TYPE(c) == &FileBacked_Type) return true;
  return !carrier_overrides(c, "get_value") && !carrier_overrides(c, "set_value");
}

// What the engine can reach of carrier c: the host memory of a native
// carrier, or the file of a live FileBacked one (either without overridden
// slot hooks); otherwise nothing.
sw::CopyEndpoint endpoint_of(PyObject* c, int itemsize) {
  void* host = carrier_host_data(c);
  if (host && no_value_hooks(c)) return sw::CopyEndpoint::host_span(host, itemsize);
  // The file is read with the hooks' item size and count: a FileBacked
  // whose dtype() or size() is overridden is copied through its slot hooks
  // (carrier_host_data applies the same rule to host memory).
  if (PyObject_TypeCheck(c, &FileBacked_Type) && !carrier_is_released(c) && no_value_hooks(c) &&
      !carrier_overrides(c, "dtype") && !carrier_overrides(c, "size")) {
    sw::FileStorage& f = reinterpret_cast<FileBackedObject*>(c)->file;
    if (f.is_open()) return sw::CopyEndpoint::file_span(f, itemsize);
  }
  return sw::CopyEndpoint::none(itemsize);
}

// Both endpoints, or false when the dtypes already rule a native copy out.
// The hooks' item size is the native one for every native endpoint: a
// carrier whose dtype() or size() is overridden has no native endpoint
// (carrier_host_data, endpoint_of), so it is copied through its slot hooks
// (issue 15 item 1: refuse the raw path rather than trust the hook).
// The destination's dtype is not asked for when the source has none native
// (a Python carrier's dtype hook is user code).
bool describe_pair(PyObject* src, PyObject* dst, sw::CopyEndpoint* s, sw::CopyEndpoint* d) {
  // A native copy moves bits: one dtype on both sides, not merely one item
  // size (Int32 and Float32 share theirs).
  const sw::DTypeCode code = carrier_code(src);
  const int item = sw::itemsize(code);
  if (item == 0 || code != carrier_code(dst)) return false;
  *s = endpoint_of(src, item);
  *d = endpoint_of(dst, item);
  return true;
}

}  // namespace

sw::CopyPlan plan_span(PyObject* src, Py_ssize_t src_off, PyObject* dst, Py_ssize_t dst_off, Py_ssize_t count) {
  sw::CopyEndpoint s, d;
  if (!describe_pair(src, dst, &s, &d)) return sw::CopyPlan();
  return sw::CopyPlan::span(s, src_off, d, dst_off, count);
}

sw::CopyPlan plan_logical(PyObject* src, Py_ssize_t src_off, const sw::Layout& src_layout, PyObject* dst,
                          Py_ssize_t dst_off, const sw::Layout& dst_layout) {
  sw::CopyEndpoint s, d;
  if (!describe_pair(src, dst, &s, &d)) return sw::CopyPlan();
  return sw::CopyPlan::logical(s, src_off, src_layout, d, dst_off, dst_layout);
}

int run_plan_unlocked(const sw::CopyPlan& plan) {
  std::exception_ptr failure;
  {
    GilRelease unlocked;
    failure = plan.run_captured();
  }
  return failure ? raise_engine_exception(failure) : 0;
}

int run_plan_locked(const sw::CopyPlan& plan) {
  std::exception_ptr failure = plan.run_captured();
  return failure ? raise_engine_exception(failure) : 0;
}

std::exception_ptr run_plan_parallel(const sw::CopyPlan& plan) noexcept {
  // The thread that submitted the move goes on running: it keeps one core,
  // the worker and its helpers take the others.
  const int ways = static_cast<int>(sw::executor_core_threads()) - 1;
  return ways < 2 ? plan.run_captured() : sw::run_parallel_captured(plan, ways);
}

int run_plan_inline(const sw::CopyPlan& plan) {
  // A small copy costs less than handing the GIL over and back.
  if (plan.bytes() <= kLockedCopyBytes) return run_plan_locked(plan);
  std::exception_ptr failure;
  {
    GilRelease unlocked;
    failure = sw::run_parallel_captured(plan);
  }
  return failure ? raise_engine_exception(failure) : 0;
}

int copy_values(PyObject* src, Py_ssize_t src_off, const sw::Layout& src_layout, PyObject* dst, Py_ssize_t dst_off,
                const sw::Layout& dst_layout) {
  if (src_layout.leaves().size() != dst_layout.leaves().size()) {
    PyErr_SetString(PyExc_ValueError, "source and destination layouts have different shapes");
    return -1;
  }
  bool done = false;
  if (engine_call([&] {
        done = sw::for_each_index_pair(
        src_layout.leaves(), dst_layout.leaves(), [&](int64_t ordinal, int64_t si, int64_t di) {
          Ref v = Ref::steal(carrier_get(src, src_off + si));
          if (!v || carrier_set_unchecked(dst, dst_off + di, v.get()) < 0) return false;
          // Offer the GIL now and then so a long fallback copy does not starve
          // other threads.
          if ((ordinal & 4095) == 4095) {
            GilRelease offer;
          }
          return true;
        });
      }) < 0)
    return -1;
  return done ? 0 : -1;
}

}  // namespace swpy::move_internal

// Span batches (move/move.hpp): framework-owned copies run asynchronously
// the way moves run, under the same exit and fork policy.
//
// Each copy is classified once, on the thread that starts the batch: a copy
// the engine can run without Python (a span or strided plan between native
// carriers whose exact-pair route is a built-in bulk or elementwise copy, a
// zero fill or an addition in host memory) is native; anything else runs
// with the GIL: a registered MoveOperation's _copy, a carrier-definition
// route's prepare / submit / wait, or the value-by-value fallback. A unit is
// native when all its copies are; every native unit runs on one worker job
// (the GIL released), every other unit on its own job. The terminal
// callback runs once, on the thread that finishes the last unit, with the
// GIL held.
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "move/internal.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "await_object.hpp"
#include "profiler_api.hpp"
#include "ops/kernels.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/compat.hpp"
#include "util/scopes.hpp"
#include "runtime/clock.hpp"
#include "runtime/executor.hpp"
#include "movement/job_tracker.hpp"

namespace swpy {

using move_internal::state;
using sw::movement::job_tracker;

namespace {

// An untimed wait() runs queued units on the waiting thread while they add
// up to at most this much: a waiter inside a native copy cannot take Ctrl-C
// until it returns.
constexpr int64_t kWaiterBytes = int64_t(64) << 20;

// A worker groups file-span units for vectored I/O up to this many bytes.
constexpr int64_t kGroupBytes = int64_t(1) << 20;

// Batches started and not yet terminal (a forked child fails these).
std::unordered_set<SpanBatch*>& live() {
  static auto* s = new std::unordered_set<SpanBatch*>();  // never destroyed: workers may outlive exit
  return *s;
}

}  // namespace

struct SpanBatch::Impl {
  struct Unit {
    std::vector<SpanCopy> copies;
    std::vector<std::function<void()>> native;  // set when every copy is native
    // Set when every copy is a span between host memory and a file, all one
    // way: the runs of a tile transfer, which the native job hands to the
    // engine together with other units' (run_independent: spans continuing
    // each other in the file become one preadv / pwritev).
    std::vector<sw::CopyPlan> file_spans;
    bool is_native = false;
    int64_t bytes = 0;
    std::atomic<bool> taken{false};
  };
  struct Transfer {
    Ref src_class, impl, shapes;
    int64_t submit_id = 0, start = 0;
    int copies = 0, done = 0;
    bool failed = false;
  };
  std::vector<std::unique_ptr<Unit>> units;
  std::vector<Ref> keep;
  std::vector<std::pair<PyObject*, int64_t>> access;
  std::vector<Transfer> transfers;
  Ref session;
  Ref error;  // the first failure (GIL held)
  int remaining = 0;  // units not finished (GIL held)
  bool started = false, terminal = false;
};

SpanBatch::SpanBatch() : impl(new Impl) {}
SpanBatch::~SpanBatch() = default;

int SpanBatch::unit() {
  impl->units.push_back(std::make_unique<Impl::Unit>());
  return static_cast<int>(impl->units.size()) - 1;
}

int SpanBatch::add(int u, const SpanCopy& c) {
  return engine_call([&] {
    impl->units[static_cast<size_t>(u)]->copies.push_back(c);
    if (c.transfer >= 0) ++impl->transfers[static_cast<size_t>(c.transfer)].copies;
  });
}

int SpanBatch::keep(PyObject* o) { return engine_call([&] { impl->keep.push_back(Ref::borrow(o)); }); }

int SpanBatch::access(PyObject* c, int64_t token) {
  return engine_call([&] { impl->access.emplace_back(c, token); });
}

bool SpanBatch::empty() const { return impl->units.empty(); }

std::vector<PyObject*> SpanBatch::carriers() const {
  std::unordered_set<PyObject*> seen;
  std::vector<PyObject*> out;
  for (const auto& u : impl->units)
    for (const SpanCopy& c : u->copies)
      for (PyObject* o : {c.src, c.dst})
        if (o && seen.insert(o).second) out.push_back(o);
  return out;
}

int SpanBatch::transfer(PyObject* src_class, PyObject* impl_class, PyObject* shapes) {
  if (!impl->session) impl->session = Ref::borrow(profiler_current());
  Impl::Transfer t;
  t.src_class = Ref::borrow(src_class);
  t.impl = Ref::borrow(impl_class);
  t.shapes = Ref::borrow(shapes);
  if (impl->session) {
    t.start = sw::now_ns();
    t.submit_id = profiler_new_id(impl->session.get());
    if (profiler_record(impl->session.get(), t.submit_id, 0, "move.submit", src_class, impl_class, shapes, t.start,
                        sw::now_ns() - t.start, current_thread_id(), true) < 0)
      return -1;
  }
  if (engine_call([&] { impl->transfers.push_back(std::move(t)); }) < 0) return -1;
  return static_cast<int>(impl->transfers.size()) - 1;
}

PyObject* SpanBatch::route(PyTypeObject* src, PyTypeObject* dst) { return move_internal::resolve_checked(src, dst); }

namespace {

using Impl = SpanBatch::Impl;

PyObject* flat_layout(Py_ssize_t n) {
  return engine_new([&] { return layout_from_engine(sw::Layout::canonical(sw::IntTree::node({sw::IntTree::leaf(n)}))); });
}

// The zero of a carrier's storage dtype, as a Python value.
PyObject* zero_value(PyObject* c) {
  Ref d = Ref::steal(carrier_dtype(c));
  if (!d) return nullptr;
  const sw::DTypeCode code = dtype_code(d.get());
  if (code == sw::DTypeCode::Bool) return Py_NewRef(Py_False);
  if (code == sw::DTypeCode::Int32) return PyLong_FromLong(0);
  return PyFloat_FromDouble(0.0);
}

sw::DTypeCode code_of(PyObject* c) {
  Ref d = Ref::steal(carrier_dtype(c));
  if (!d) {
    PyErr_Clear();
    return sw::DTypeCode::Any;
  }
  return dtype_code(d.get());
}

bool file_kind(const sw::CopyPlan& p) {
  return p.kind() == sw::CopyPlanKind::FileToHost || p.kind() == sw::CopyPlanKind::HostToFile ||
         p.kind() == sw::CopyPlanKind::FileToFile;
}

// A logical copy with a file side, as span plans of its runs contiguous on
// both sides: the engine's logical plan with a file copies the whole
// physical span, holes included, and a tile's holes are other tiles' slots.
std::vector<sw::CopyPlan> logical_runs(const SpanCopy& c) {
  std::vector<sw::CopyPlan> out;
  int64_t s0 = 0, d0 = 0, n = 0;
  auto flush = [&] {
    if (n) out.push_back(move_internal::plan_span(c.src, c.src_off + s0, c.dst, c.dst_off + d0, n));
  };
  sw::for_each_index_pair(c.src_layout.leaves(), c.dst_layout.leaves(), [&](int64_t, int64_t si, int64_t di) {
    if (n && si == s0 + n && di == d0 + n) {
      ++n;
    } else {
      flush();
      s0 = si, d0 = di, n = 1;
    }
    return true;
  });
  flush();
  return out;
}

// The copy as engine work, or an empty function (it needs Python). spans
// gets the copy's plans when it is wholly host/file spans one way.
std::function<void()> native_step(const SpanCopy& c, int64_t* bytes, std::vector<sw::CopyPlan>* spans) {
  using move_internal::plan_logical;
  using move_internal::plan_span;
  if (c.zero) {
    char* host = static_cast<char*>(carrier_host_data(c.dst));
    const size_t item = sw::itemsize(code_of(c.dst));
    if (!host || !item) return {};
    char* p = host + static_cast<size_t>(c.dst_off) * item;
    const size_t n = static_cast<size_t>(c.count) * item;
    *bytes += static_cast<int64_t>(n);
    return [p, n] { std::memset(p, 0, n); };
  }
  if (c.add) {
    const sw::DTypeCode code = code_of(c.dst);
    char* d = static_cast<char*>(carrier_host_data(c.dst));
    const char* s = static_cast<const char*>(carrier_host_data(c.src));
    if (!d || !s || code != code_of(c.src) || !sw::kernels::supports(code)) return {};
    const size_t item = sw::itemsize(code);
    char* dp = d + static_cast<size_t>(c.dst_off) * item;
    const char* sp = s + static_cast<size_t>(c.src_off) * item;
    *bytes += c.src_layout.size() * static_cast<int64_t>(item);
    return [code, dp, sp, ls = c.src_layout.leaves(), ld = c.dst_layout.leaves()] {
      sw::kernels::add(code, dp, ld, sp, ls, dp, ld);
    };
  }
  std::vector<sw::CopyPlan> plans;
  if (c.logical) {
    sw::CopyPlan plan = plan_logical(c.src, c.src_off, c.src_layout, c.dst, c.dst_off, c.dst_layout);
    if (file_kind(plan) && c.src_layout.cosize() != c.src_layout.size()) plans = logical_runs(c);
    else plans.push_back(std::move(plan));
  } else {
    Ref op = Ref::steal(SpanBatch::route(Py_TYPE(c.src), Py_TYPE(c.dst)));
    if (!op) {
      PyErr_Clear();  // the Python step raises it again, as the copy's failure
      return {};
    }
    Ref copy = Ref::steal(PyObject_GetAttr(op.get(), state.copy_name));
    if (!copy) {
      PyErr_Clear();
      return {};
    }
    if (copy.get() == state.elementwise_copy || copy.get() == state.bulk_copy_c2f ||
        copy.get() == state.bulk_copy_f2c)
      plans.push_back(plan_span(c.src, c.src_off, c.dst, c.dst_off, c.count));
  }
  if (plans.empty()) return {};
  for (const sw::CopyPlan& p : plans) {
    if (!p.native()) return {};
    *bytes += p.bytes();
  }
  if (plans.size() == 1) {
    const sw::CopyPlanKind k = plans[0].kind();
    if (k == sw::CopyPlanKind::FileToHost || k == sw::CopyPlanKind::HostToFile) spans->push_back(plans[0]);
    return [plan = std::move(plans[0])] { plan.run(); };
  }
  const bool one_way = plans[0].kind() != sw::CopyPlanKind::FileToFile;
  if (one_way) spans->insert(spans->end(), plans.begin(), plans.end());
  return [plans = std::move(plans)] {
    std::vector<const sw::CopyPlan*> ptrs;
    for (const sw::CopyPlan& p : plans) ptrs.push_back(&p);
    sw::run_independent(ptrs);
  };
}

// One copy with the GIL held (owner access and grad mode already set). 0 / -1.
int python_step(const SpanCopy& c) {
  using move_internal::copy_values;
  if (c.zero) {
    Ref z = Ref::steal(zero_value(c.dst));
    if (!z) return -1;
    for (Py_ssize_t i = 0; i < c.count; ++i)
      if (carrier_set_unchecked(c.dst, c.dst_off + i, z.get()) < 0) return -1;
    return 0;
  }
  if (c.add) {
    bool ok = true;
    if (engine_call([&] {
          sw::for_each_index_pair(c.src_layout.leaves(), c.dst_layout.leaves(), [&](int64_t, int64_t si, int64_t di) {
            Ref a = Ref::steal(carrier_get(c.dst, c.dst_off + di));
            Ref b = a ? Ref::steal(carrier_get(c.src, c.src_off + si)) : Ref();
            Ref sum = b ? Ref::steal(PyNumber_Add(a.get(), b.get())) : Ref();
            ok = sum && carrier_set_unchecked(c.dst, c.dst_off + di, sum.get()) == 0;
            return ok;
          });
        }) < 0)
      return -1;
    return ok ? 0 : -1;
  }
  if (c.logical) return copy_values(c.src, c.src_off, c.src_layout, c.dst, c.dst_off, c.dst_layout);
  Ref op = Ref::steal(SpanBatch::route(Py_TYPE(c.src), Py_TYPE(c.dst)));
  if (!op) return -1;
  Ref lay = Ref::steal(flat_layout(c.count));
  Ref tensor = lay ? Ref::steal(tensor_new(c.src, c.src_off, lay.get())) : Ref();
  if (!tensor) return -1;
  const sw::Layout& flat = layout_of(lay.get());
  if (state.route_hooks.prepare) {
    PyObject* prepared = nullptr;
    const int r = state.route_hooks.prepare(op.get(), tensor.get(), c.dst, c.dst_off, true, &prepared);
    if (r < 0) return -1;
    Ref p = Ref::steal(prepared);
    if (r == 2) return copy_values(c.src, c.src_off, flat, c.dst, c.dst_off, flat);
    if (r == 1) {
      PyObject* completion = nullptr;
      const int s = state.route_hooks.submit(p.get(), &completion);
      Ref done = Ref::steal(completion);
      if (s < 0) return -1;
      if (s == 1) {
        sw::BlockingScope blocked;
        return state.route_hooks.wait(done.get());
      }
      return 0;
    }
  }
  Ref copy = Ref::steal(PyObject_GetAttr(op.get(), state.copy_name));
  if (!copy) return -1;
  if (copy.get() == state.elementwise_copy) return copy_values(c.src, c.src_off, flat, c.dst, c.dst_off, flat);
  Ref instance = Ref::steal(PyObject_CallNoArgs(op.get()));
  Ref output = instance ? Ref::steal(tensor_new(c.dst, c.dst_off, lay.get())) : Ref();
  if (!output) return -1;
  Ref r = Ref::steal(PyObject_CallMethod(instance.get(), "_copy", "OOOn", tensor.get(), c.dst, output.get(),
                                         c.count));
  if (!r) return -1;
  if (r.get() != Py_None) {
    PyErr_Format(PyExc_TypeError, "%s._copy() must return None, not %.100s", type_name(instance.get()),
                 type_name(r.get()));
    return -1;
  }
  return 0;
}

int run_python_unit(Impl& b, Impl::Unit& u) {
  NoGrad no_grad;
  std::vector<std::unique_ptr<OwnerAccess>> scopes;
  for (const auto& [c, token] : b.access) {
    scopes.push_back(std::make_unique<OwnerAccess>(c, token));
    if (!scopes.back()->ok()) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a carrier of the transfer has no owner token");
      return -1;
    }
  }
  sw::BlockingScope blocked;  // a Python hook may wait on other work
  for (const SpanCopy& c : u.copies)
    if (python_step(c) < 0) return -1;
  return 0;
}

std::vector<const sw::CopyPlan*> plans_of(const Impl::Unit& u) {
  std::vector<const sw::CopyPlan*> out;
  for (const sw::CopyPlan& p : u.file_spans) out.push_back(&p);
  return out;
}

std::exception_ptr run_native_unit(Impl::Unit& u) noexcept {
  return engine_capture([&] {
    if (!u.file_spans.empty())
      sw::run_independent(plans_of(u));
    else
      for (const auto& step : u.native) step();
  });
}

void record_complete(Impl& b, Impl::Transfer& t) {
  if (!b.session) return;
  ErrorGuard keep;
  const int64_t now = sw::now_ns();
  profiler_record(b.session.get(), profiler_new_id(b.session.get()), t.submit_id, "move.complete",
                  t.src_class.get(), t.impl.get(), t.shapes.get(), t.start, now - t.start, current_thread_id(),
                  !t.failed);
}

void terminal(const std::shared_ptr<SpanBatch>& sb) {
  Impl& b = *sb->impl;
  b.terminal = true;
  live().erase(sb.get());
  job_tracker().untrack(sb.get());
  if (b.error) compat::restore_raised(b.error.release());
  const bool ok = !PyErr_Occurred();
  if (sb->done) sb->done(ok);
  if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);  // the callback should have consumed it
  ErrorGuard keep;
  sb->done = nullptr;
  b.keep.clear();
  b.session.reset();
  b.transfers.clear();
}

// Unit u finished (GIL held): its failure (raised, when !ok) is kept as the
// batch's first, its transfers complete, and the last unit ends the batch.
void unit_done(const std::shared_ptr<SpanBatch>& sb, Impl::Unit& u, bool ok) {
  Impl& b = *sb->impl;
  if (!ok) {
    Ref e = Ref::steal(compat::take_raised());
    if (!b.error) b.error = std::move(e);
  }
  for (const SpanCopy& c : u.copies) {
    if (c.transfer < 0) continue;
    Impl::Transfer& t = b.transfers[static_cast<size_t>(c.transfer)];
    t.failed = t.failed || !ok;
    if (++t.done == t.copies) record_complete(b, t);
  }
  {
    ErrorGuard keep;
    u.copies.clear();  // drop the plans' captures early
    u.native.clear();
    u.file_spans.clear();
  }
  if (--b.remaining == 0) terminal(sb);
}

bool take(Impl::Unit& u) {
  bool expected = false;
  return u.taken.compare_exchange_strong(expected, true);
}

// A worker job: every native unit not taken by a waiter (GIL released).
void native_job(const std::shared_ptr<SpanBatch>& sb) {
  Impl& b = *sb->impl;
  std::vector<std::pair<Impl::Unit*, std::exception_ptr>> ran;
  // File-span units are taken into a group until it holds kGroupBytes and
  // run together (spans continuing each other in a file become one vectored
  // call: many small tiles); larger tiles go one by one, so a waiter can
  // take the next unit meanwhile.
  std::vector<const sw::CopyPlan*> group;
  size_t group_first = 0;
  int64_t group_bytes = 0;
  auto run_group = [&] {
    if (group.empty()) return;
    // Every unit of the group fails with what it throws.
    const std::exception_ptr e = engine_capture([&] { sw::run_independent(group); });
    for (size_t i = group_first; i < ran.size(); ++i) ran[i].second = e;
    group.clear();
    group_bytes = 0;
  };
  for (auto& u : b.units) {
    if (!u->is_native || !take(*u)) continue;
    if (u->file_spans.empty()) {
      ran.emplace_back(u.get(), run_native_unit(*u));
      continue;
    }
    if (group.empty()) group_first = ran.size();
    const auto p = plans_of(*u);
    group.insert(group.end(), p.begin(), p.end());
    group_bytes += u->bytes;
    ran.emplace_back(u.get(), nullptr);
    if (group_bytes >= kGroupBytes) run_group();
  }
  run_group();
  if (compat::is_finalizing()) {
    job_tracker().end();  // leave the objects to the dying runtime
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  for (auto& [u, e] : ran) {
    bool ok = true;
    if (e) ok = raise_engine_exception(e) == 0;
    unit_done(sb, *u, ok);
  }
  PyGILState_Release(g);
  job_tracker().end();
}

void python_job(const std::shared_ptr<SpanBatch>& sb, Impl::Unit* u) {
  if (compat::is_finalizing()) {
    job_tracker().end();
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  if (take(*u)) unit_done(sb, *u, run_python_unit(*sb->impl, *u) == 0);
  PyGILState_Release(g);
  job_tracker().end();
}

// The runner an untimed wait() calls (GIL held): runs the units no worker
// has started, in order, within kWaiterBytes.
PyObject* run_on_waiter(PyObject* capsule, PyObject*) {
  auto* holder = static_cast<std::shared_ptr<SpanBatch>*>(PyCapsule_GetPointer(capsule, "swpy.SpanBatch"));
  if (!holder) return nullptr;
  std::shared_ptr<SpanBatch> sb = *holder;
  Impl& b = *sb->impl;
  int64_t budget = kWaiterBytes;
  for (auto& u : b.units) {
    if (b.terminal) break;
    if (u->bytes > budget || u->taken.load()) continue;
    if (!take(*u)) continue;
    budget -= u->bytes;
    bool ok;
    if (u->is_native) {
      std::exception_ptr e;
      {
        GilRelease unlocked;
        e = run_native_unit(*u);
      }
      ok = !e || raise_engine_exception(e) == 0;
    } else {
      ok = run_python_unit(b, *u) == 0;
    }
    unit_done(sb, *u, ok);
  }
  Py_RETURN_NONE;
}

PyMethodDef runner_def = {"_run_queued_transfers", run_on_waiter, METH_NOARGS, nullptr};

void free_holder(PyObject* capsule) {
  delete static_cast<std::shared_ptr<SpanBatch>*>(PyCapsule_GetPointer(capsule, "swpy.SpanBatch"));
}

int set_runner(const std::shared_ptr<SpanBatch>& sb, PyObject* handle) {
  auto* holder = new (std::nothrow) std::shared_ptr<SpanBatch>(sb);
  if (!holder) {
    PyErr_NoMemory();
    return -1;
  }
  Ref capsule = Ref::steal(PyCapsule_New(holder, "swpy.SpanBatch", free_holder));
  if (!capsule) {
    delete holder;
    return -1;
  }
  Ref fn = Ref::steal(PyCFunction_New(&runner_def, capsule.get()));
  if (!fn) return -1;
  return await_set_runner(handle, fn.get());
}

// Plans u's copies: its native steps (all or none) and, when every copy is
// a host/file span one way, its file spans. Whether it is native.
bool classify(Impl::Unit& u) {
  std::vector<std::function<void()>> steps;
  std::vector<sw::CopyPlan> spans;
  int64_t bytes = 0;
  bool spans_only = true;
  for (const SpanCopy& c : u.copies) {
    std::vector<sw::CopyPlan> mine;
    std::function<void()> s = native_step(c, &bytes, &mine);
    if (!s) return false;
    steps.push_back(std::move(s));
    spans_only = spans_only && !mine.empty() && (spans.empty() || spans.front().kind() == mine.front().kind());
    if (spans_only) spans.insert(spans.end(), mine.begin(), mine.end());
  }
  u.native = std::move(steps);
  if (spans_only) u.file_spans = std::move(spans);
  u.bytes = bytes;
  return true;
}

}  // namespace

int span_batch_start(std::shared_ptr<SpanBatch> sb, PyObject* handle) {
  Impl& b = *sb->impl;
  if (b.started) {
    PyErr_SetString(PyExc_RuntimeError, "a span batch starts once");
    return -1;
  }
  if (move_internal::refuse_after_shutdown() < 0) return -1;
  b.started = true;
  int native = 0, python = 0;
  for (auto& u : b.units) {
    u->is_native = classify(*u);
    ++(u->is_native ? native : python);
  }
  b.remaining = static_cast<int>(b.units.size());
  if (b.units.empty()) {
    b.terminal = true;
    if (sb->done) sb->done(true);
    sb->done = nullptr;
    return 0;
  }
  const int jobs = (native ? 1 : 0) + python;
  // Tracked once per job (the drain counts jobs in flight); pending until
  // the terminal callback.
  if (engine_call([&] {
        for (int i = 0; i < jobs; ++i) job_tracker().begin(sb.get(), true);
      }) < 0) {
    b.started = false;
    return -1;
  }
  live().insert(sb.get());
  if (handle && set_runner(sb, handle) < 0) PyErr_Clear();  // the workers run it all
  // From here on every unit runs (a job no worker takes runs on this thread).
  if (native && engine_capture([&] { sw::submit([sb] { native_job(sb); }); })) native_job(sb);
  for (auto& u : b.units) {
    if (u->is_native) continue;
    Impl::Unit* up = u.get();
    if (engine_capture([&] { sw::submit([sb, up] { python_job(sb, up); }); })) python_job(sb, up);
  }
  return 0;
}

int span_batch_run_here(SpanBatch& sb) {
  Impl& b = *sb.impl;
  for (auto& u : b.units) {
    if (classify(*u)) {
      std::exception_ptr e;
      if (u->bytes > move_internal::kLockedCopyBytes) {
        GilRelease unlocked;
        e = run_native_unit(*u);
      } else {
        e = run_native_unit(*u);
      }
      if (e) return raise_engine_exception(e);
    } else if (run_python_unit(b, *u) < 0) {
      return -1;
    }
  }
  return 0;
}

namespace move_internal {

bool span_batch_after_fork(void* job) {
  auto* sb = static_cast<SpanBatch*>(job);
  if (!live().count(sb)) return false;
  live().erase(sb);
  Impl& b = *sb->impl;
  b.terminal = true;
  PyErr_SetString(PyExc_RuntimeError,
                  "the tiled request was pending at fork: its transfers run in the parent process only; its tiles "
                  "and carriers are given back in this child");
  if (sb->done) sb->done(false);
  if (PyErr_Occurred()) PyErr_Clear();
  // The parent's queued jobs hold the batch: it is left alone (leaked) here.
  return true;
}

}  // namespace move_internal

}  // namespace swpy

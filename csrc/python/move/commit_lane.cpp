// Native moves between built-in carriers (no Python code anywhere in their
// commit): the worker copies without the GIL, queues the job for its
// terminal commit and goes back to the pool; one worker at a time takes the
// GIL and commits every queued job. Without the lane each finished copy held
// its worker in PyGILState_Ensure while the submitting thread kept the GIL,
// so a burst of move_async calls looked like a pool of blocked workers and
// the executor started one thread per move (and the burst paid for it).
#include <pthread.h>

#include <exception>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "carrier_object.hpp"
#include "executor.hpp"
#include "move/internal.hpp"
#include "util/compat.hpp"
#include "util/errors.hpp"

namespace swpy::move_internal {

namespace {

struct Lane {
  std::mutex m;
  std::vector<std::pair<MoveJob*, std::exception_ptr>> queue;
  bool committing = false;  // a thread owns the draining loop
};

// Never destroyed: detached workers may still use it at exit. A forked child
// starts afresh (the parent's workers, and so its queued jobs, do not exist
// there, and the mutex may have been held at fork).
Lane* g_lane = new Lane;
std::once_flag g_atfork_once;

void reset_in_child() { g_lane = new (std::nothrow) Lane; }

// Commits every queued job, holding the GIL, until the queue is empty. Run by
// the thread that set committing.
void drain(Lane* lane) {
  if (compat::is_finalizing()) {
    // Too late to take the GIL: leave the jobs to the dying runtime.
    std::lock_guard<std::mutex> lk(lane->m);
    state.in_flight.fetch_sub(lane->queue.size());
    lane->queue.clear();
    return;  // committing stays set: nobody commits from here on
  }
  PyGILState_STATE g = PyGILState_Ensure();
  for (;;) {
    std::vector<std::pair<MoveJob*, std::exception_ptr>> batch;
    {
      std::lock_guard<std::mutex> lk(lane->m);
      batch.swap(lane->queue);
      if (batch.empty()) {
        lane->committing = false;
        break;
      }
    }
    for (auto& [j, failure] : batch) {
      const bool ok = !failure || raise_engine_exception(failure) == 0;
      commit(j, ok);
      state.in_flight.fetch_sub(1);
    }
  }
  PyGILState_Release(g);
}

void run_native(MoveJob* j) {
  std::exception_ptr failure = run_plan_parallel(j->plan);
  j->plan = sw::CopyPlan();
  Lane* lane = g_lane;
  {
    std::lock_guard<std::mutex> lk(lane->m);
    lane->queue.emplace_back(j, std::move(failure));
    if (lane->committing) return;  // the committing thread takes it
    lane->committing = true;
  }
  drain(lane);
}

}  // namespace

bool commits_in_lane(const MoveJob* j) {
  auto builtin = [](PyObject* c) { return Py_TYPE(c) == &CPU_Type || Py_TYPE(c) == &FileBacked_Type; };
  return j->kind == CopyKind::Native && builtin(j->source.get()) && builtin(j->dest.get());
}

int start_native_worker(MoveJob* j) {
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, reset_in_child); });
  if (!g_lane) {
    PyErr_NoMemory();
    return -1;
  }
  state.in_flight.fetch_add(1);
  try {
    sw::submit([j] { run_native(j); });
  } catch (...) {
    state.in_flight.fetch_sub(1);
    PyErr_SetString(PyExc_RuntimeError, "cannot start a move worker thread");
    return -1;
  }
  return 0;
}

}  // namespace swpy::move_internal

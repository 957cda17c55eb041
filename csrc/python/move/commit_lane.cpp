// Native moves between built-in carriers (no Python code anywhere in their
// commit): the worker copies without the GIL and posts the job to the
// engine's commit lane (sw::movement::CommitLane, which says why); the
// worker that becomes the committer takes the GIL and commits every queued
// job.
#include <exception>
#include <utility>

#include "carrier_object.hpp"
#include "move/internal.hpp"
#include "movement/commit_lane.hpp"
#include "movement/job_tracker.hpp"
#include "movement/submit_policy.hpp"
#include "util/compat.hpp"
#include "util/errors.hpp"
#include "util/gil_gate.hpp"

namespace swpy::move_internal {

namespace {

using sw::movement::CommitLane;
using sw::movement::job_tracker;

// The committer's loop: commits every queued job, holding the GIL, until
// the lane is empty.
void drain(CommitLane& lane) {
  PyGILState_STATE g;
  if (!gil_gate::ensure(&g)) {
    // Too late to take the GIL: leave the jobs to the dying runtime.
    job_tracker().end(lane.abandon());
    return;
  }
  for (auto batch = lane.take_batch(); !batch.empty(); batch = lane.take_batch()) {
    for (auto& [job, failure] : batch) {
      const bool ok = !failure || raise_engine_exception(failure) == 0;
      commit(static_cast<MoveJob*>(job), ok);
      job_tracker().end();
    }
  }
  PyGILState_Release(g);
}

// The worker: the lane exists (start_native_worker made sure of it).
void run_native(MoveJob* j, CommitLane* lane) {
  std::exception_ptr failure = run_plan_parallel(j->plan);
  j->plan = sw::CopyPlan();
  if (lane->post(j, std::move(failure))) drain(*lane);
}

bool builtin(PyObject* c) { return Py_TYPE(c) == &CPU_Type || Py_TYPE(c) == &FileBacked_Type; }

}  // namespace

bool commits_in_lane(const MoveJob* j) {
  sw::movement::RouteFacts f;
  f.native = j->kind == CopyKind::Native;
  f.src_builtin = builtin(j->source.get());
  f.dst_builtin = builtin(j->dest.get());
  return sw::movement::commits_in_lane(f);
}

int start_native_worker(MoveJob* j) {
  return engine_call([j] {
    CommitLane* lane = &sw::movement::commit_lane();
    job_tracker().launch(j, false, [j, lane] { run_native(j, lane); });
  });
}

}  // namespace swpy::move_internal

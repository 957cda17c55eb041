// The commit lane: workers that finished a native copy queue the job for
// its terminal commit and go back to the pool; one thread at a time (the
// committer) takes the queued jobs in batches and commits them. Without it
// each finished copy held its worker waiting for the interpreter lock while
// the submitting thread kept it, so a burst of moves looked like a pool of
// blocked workers and the executor started one thread per move.
//
// The lane holds opaque job handles and each copy's failure; what a commit
// does is the caller's.
#pragma once
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "movement/job_tracker.hpp"

namespace sw::movement {

class CommitLane {
 public:
  using Entry = std::pair<JobHandle, std::exception_ptr>;

  // Queues a finished job (failure: what its copy threw, or null). True
  // when the caller became the committer and must run take_batch() until it
  // returns an empty batch; false when the current committer takes it.
  bool post(JobHandle job, std::exception_ptr failure);
  // The committer's next batch, in posting order. An empty batch ends the
  // committer's turn: the next post() makes a new committer.
  std::vector<Entry> take_batch();
  // The committer cannot commit any more (the runtime is finalizing): drops
  // every queued job and returns how many. Nobody commits from then on.
  std::size_t abandon();
  std::size_t queued() const;

 private:
  mutable std::mutex m_;
  std::vector<Entry> queue_;
  bool committing_ = false;
};

// The process's lane. Never destroyed: detached workers may still use it at
// exit. A forked child starts with a fresh one (the parent's workers, and so
// its queued jobs, do not exist there, and the mutex may have been held at
// fork). Throws std::bad_alloc when the child could not allocate it.
CommitLane& commit_lane();

}  // namespace sw::movement

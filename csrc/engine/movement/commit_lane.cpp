#include "movement/commit_lane.hpp"

#include <pthread.h>

#include <new>

namespace sw::movement {

bool CommitLane::post(JobHandle job, std::exception_ptr failure) {
  std::lock_guard<std::mutex> lk(m_);
  queue_.emplace_back(job, std::move(failure));
  if (committing_) return false;
  committing_ = true;
  return true;
}

std::vector<CommitLane::Entry> CommitLane::take_batch() {
  std::vector<Entry> batch;
  std::lock_guard<std::mutex> lk(m_);
  batch.swap(queue_);
  if (batch.empty()) committing_ = false;
  return batch;
}

std::size_t CommitLane::abandon() {
  std::lock_guard<std::mutex> lk(m_);
  const std::size_t n = queue_.size();
  queue_.clear();
  return n;  // committing_ stays set
}

std::size_t CommitLane::queued() const {
  std::lock_guard<std::mutex> lk(m_);
  return queue_.size();
}

namespace {

CommitLane* g_lane = nullptr;
std::once_flag g_init;

void reset_in_child() { g_lane = new (std::nothrow) CommitLane; }

}  // namespace

CommitLane& commit_lane() {
  std::call_once(g_init, [] {
    g_lane = new CommitLane;
    pthread_atfork(nullptr, nullptr, reset_in_child);
  });
  if (!g_lane) throw std::bad_alloc();
  return *g_lane;
}

}  // namespace sw::movement

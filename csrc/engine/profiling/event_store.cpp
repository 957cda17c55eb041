#include "profiling/event_store.hpp"

#include <iterator>
#include <stdexcept>
#include <utility>

namespace sw::profiling {

EventStore::EventStore(KeyOps ops, std::vector<Key> filter, bool filtered, bool record_shapes)
    : ops_(ops), filter_(std::move(filter)), filtered_(filtered), record_shapes_(record_shapes) {
  if (ops_.retain)
    for (Key k : filter_) ops_.retain(k);
}

EventStore::~EventStore() { clear(); }

void EventStore::enter() {
  if (state_ != SessionState::New) throw std::logic_error("a profile context is single-use and was already entered");
  state_ = SessionState::Active;
}

void EventStore::exit() noexcept {
  if (state_ == SessionState::Active) state_ = SessionState::Finished;
}

bool EventStore::passes(Key carrier_type) const {
  if (!filtered_) return true;
  if (!carrier_type || !ops_.is_subclass) return false;
  for (Key base : filter_)
    if (ops_.is_subclass(carrier_type, base)) return true;
  return false;
}

void EventStore::record(Event e) {
  if (!passes(e.carrier_type)) return;
  if (!record_shapes_) e.input_shapes = 0;
  events_.push_back(std::move(e));
  if (ops_.retain) {
    const Event& kept = events_.back();
    for (Key k : {kept.carrier_type, kept.implementation_type, kept.input_shapes})
      if (k) ops_.retain(k);
  }
}

void EventStore::clear() {
  // Detach first: a release may run code that records into this store.
  std::vector<Event> events;
  std::vector<Key> filter;
  events.swap(events_);
  filter.swap(filter_);
  filtered_ = false;
  if (!ops_.release) return;
  for (const Event& e : events)
    for (Key k : {e.carrier_type, e.implementation_type, e.input_shapes})
      if (k) ops_.release(k);
  for (Key k : filter) ops_.release(k);
}

namespace {

thread_local std::vector<std::pair<const void*, int64_t>> t_open;

}  // namespace

int64_t parent_id(const void* session) noexcept {
  for (auto it = t_open.rbegin(); it != t_open.rend(); ++it)
    if (it->first == session) return it->second;
  return 0;
}

void push_open(const void* session, int64_t id) { t_open.emplace_back(session, id); }

void pop_open(const void* session) noexcept {
  for (auto it = t_open.rbegin(); it != t_open.rend(); ++it) {
    if (it->first == session) {
      t_open.erase(std::next(it).base());
      return;
    }
  }
}

}  // namespace sw::profiling

// The event store behind a profiling session: raw events, id allocation,
// the session's single-use lifecycle (new -> active -> finished), its
// carrier filter and the per-thread stack of open operation events that
// gives nested events their parent. Objects an event refers to (classes, a
// shapes tuple) are opaque keys; the store pins what it keeps through the
// KeyOps it was built with, and releases every pin on clear().
//
// Not locked: events may come from any thread, but the caller serialises
// every call on one session (the binding holds the interpreter lock).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sw::profiling {

using Key = std::uintptr_t;  // 0: none

struct KeyOps {
  void (*retain)(Key) = nullptr;
  void (*release)(Key) = nullptr;
  // Whether cls is base or derives from it (the carrier filter).
  bool (*is_subclass)(Key cls, Key base) = nullptr;
};

struct Event {
  int64_t id = 0;
  int64_t parent_id = 0;  // 0: top level
  std::string name;
  Key carrier_type = 0;
  Key implementation_type = 0;
  Key input_shapes = 0;  // kept only when the session records shapes
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  uint64_t thread_id = 0;
  bool succeeded = false;
};

enum class SessionState { New, Active, Finished };

class EventStore {
 public:
  // filter: carrier classes an event's carrier_type must derive from (none:
  // every event is kept); pinned for the store's lifetime.
  EventStore(KeyOps ops, std::vector<Key> filter, bool filtered, bool record_shapes);
  EventStore(const EventStore&) = delete;
  EventStore& operator=(const EventStore&) = delete;
  ~EventStore();

  // new -> active. Throws std::logic_error when the session was entered
  // before (a profile context is single-use).
  void enter();
  // active -> finished; otherwise nothing changes.
  void exit() noexcept;
  // Any state -> finished (an abandoned session: nobody can end it).
  void finish() noexcept { state_ = SessionState::Finished; }
  SessionState state() const noexcept { return state_; }
  bool active() const noexcept { return state_ == SessionState::Active; }

  // Ids are unique within the session, from 1.
  int64_t new_id() noexcept { return next_id_++; }
  // Whether an event on carrier_type passes the carrier filter.
  bool passes(Key carrier_type) const;
  // Keeps e when it passes the filter (dropping input_shapes unless shapes
  // are recorded), pinning its keys. Throws std::bad_alloc.
  void record(Event e);

  std::size_t size() const noexcept { return events_.size(); }
  // A copy: the caller may record more events while it uses it.
  Event at(std::size_t i) const { return events_.at(i); }
  // Calls visit on every pinned key until one returns non-zero, which is
  // returned (the binding's GC traversal).
  template <class Visit>
  int visit_keys(Visit&& visit) const {
    for (Key k : filter_)
      if (int r = visit(k)) return r;
    for (const Event& e : events_)
      for (Key k : {e.carrier_type, e.implementation_type, e.input_shapes})
        if (k)
          if (int r = visit(k)) return r;
    return 0;
  }
  // Drops every event and the filter, releasing their pins.
  void clear();

 private:
  KeyOps ops_;
  std::vector<Key> filter_;
  bool filtered_;
  bool record_shapes_;
  SessionState state_ = SessionState::New;
  int64_t next_id_ = 1;
  std::vector<Event> events_;
};

// This thread's stack of open operation events, across sessions (session
// is the store's identity). parent_id: the innermost open event of session
// on this thread, 0 when none.
int64_t parent_id(const void* session) noexcept;
// Throws std::bad_alloc.
void push_open(const void* session, int64_t id);
// Closes session's innermost open event on this thread.
void pop_open(const void* session) noexcept;

}  // namespace sw::profiling

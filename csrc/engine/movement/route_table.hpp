// The exact-pair route registry: (source class, destination class) ->
// operation class, with classes as opaque keys. Resolution is by exact
// class only (a subclass pair has no entry of its own unless registered).
// An entry pins its three classes through the Retainer the table was built
// with, so the binding can keep them alive for as long as the entry exists;
// a pin is released only after the entry left the table (releasing may run
// arbitrary code, which may use the table again).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace sw::movement {

using ClassKey = std::uintptr_t;

struct Retainer {
  void (*retain)(ClassKey) = nullptr;
  void (*release)(ClassKey) = nullptr;
};

class RouteTable {
 public:
  explicit RouteTable(Retainer pins = {}) : pins_(pins) {}
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;
  ~RouteTable();

  // Registers op for the exact pair. When the pair already has an entry
  // nothing changes and its operation (the conflict) is returned.
  std::optional<ClassKey> add(ClassKey src, ClassKey dst, ClassKey op);
  // Removes the pair's entry and returns its operation, whose pin passes to
  // the caller (to release when done with it); nullopt when none.
  std::optional<ClassKey> remove(ClassKey src, ClassKey dst);
  // Removes the pair's entry only while it still maps to op. True when it
  // did.
  bool remove_if(ClassKey src, ClassKey dst, ClassKey op);
  std::optional<ClassKey> find(ClassKey src, ClassKey dst) const;
  // The exact pair's operation, else fallback.
  ClassKey resolve(ClassKey src, ClassKey dst, ClassKey fallback) const;
  std::size_t size() const;
  // Changes with every entry added or removed (scopes included), never
  // returning to an earlier value: a cache of resolutions taken at one
  // generation is valid exactly while generation() still returns it.
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // A registration that holds only while a scope is entered (the binding's
  // registered_move_operation context manager).
  class Scope {
   public:
    Scope(ClassKey src, ClassKey dst, ClassKey op) : src_(src), dst_(dst), op_(op) {}
    // Throws std::logic_error ("... already entered") when this scope is
    // entered.
    void check_enterable() const;
    // Registers the pair (check_enterable() first). Returns the conflicting
    // operation (and stays out) when the pair is taken.
    std::optional<ClassKey> enter(RouteTable& table);
    // Unregisters the pair when this scope registered it and the pair still
    // maps to its operation (the body may have unregistered it already).
    void exit(RouteTable& table);
    bool active() const { return active_; }

   private:
    ClassKey src_, dst_, op_;
    bool active_ = false;
  };

 private:
  using Pair = std::pair<ClassKey, ClassKey>;
  void unpin(const Pair& pair, ClassKey op) const;

  Retainer pins_;
  mutable std::mutex m_;
  std::map<Pair, ClassKey> routes_;
  std::atomic<std::uint64_t> generation_{0};  // bumped under m_
};

}  // namespace sw::movement

// The registry of definition-backed carrier classes (the carrier-extension
// API's definitions) over opaque class keys (the binding passes type object
// addresses) and opaque handles (borrowed pointers to objects the binding
// keeps alive: StorageProviders, route operation classes).
//
// Rules:
// - A class gets a definition at most once, and only before it is observed.
//   Observing a class (an instance built, a route resolved, a legacy registry
//   call naming it) observes its Python bases too and freezes what each of
//   them is: definition-backed with its own storage, or definition-free for
//   good. So a definition can never change how a seen class stores or moves
//   its values.
// - Every route of a class's definition is outgoing (its source is the
//   class) or incoming (its destination is the class, its source a
//   definition-free class, which registration seals as such). An exact
//   (source, destination) pair therefore has at most one route.
// - Definitions are exact-class: a subclass of a defined class has none
//   unless it registers its own (defined_base names the base for the error).
// - The elementwise fallback serves a pair only when each definition-backed
//   class of the pair permits it; definition-free classes keep the legacy
//   contract, under which every unregistered pair falls back.
// Not thread-safe: the binding calls it with the GIL held.
#pragma once
#include <cstddef>
#include <unordered_map>
#include <vector>

namespace sw::ext {

using ClassKey = const void*;
using Handle = const void*;

// A definition's storage: the provider, and whether it lets the elementwise
// fallback move its values.
struct Storage {
  Handle provider = nullptr;
  bool permits_fallback = false;
};

// Whether the exact pair may fall back to the elementwise copy (null: a
// definition-free class).
bool fallback_permitted(const Storage* src, const Storage* dst);
// How a class stands on the fallback, for messages.
const char* fallback_stance(const Storage* s);

enum class RouteOwner { Outgoing, Incoming, Foreign, IncomingFromDefined };
enum class RegistrationProblem { None, AlreadyDefined, AlreadyObserved };

struct Route {
  ClassKey source;
  ClassKey destination;
  Handle operation;  // the route's operation class
};

class Registry {
 public:
  // Registration: the checks, in the binding's order, then define().
  RouteOwner route_owner(ClassKey cls, ClassKey source, ClassKey destination) const;
  RegistrationProblem registration_problem(ClassKey cls) const;
  // Defines cls with storage and its routes. Preconditions:
  // registration_problem(cls) is None, every route's owner is Outgoing or
  // Incoming, and the incoming routes' sources were observed (sealed).
  void define(ClassKey cls, Storage storage, const std::vector<Route>& routes);
  bool defined(ClassKey cls) const { return definitions_.count(cls) != 0; }

  // Observation. lookup: true with *storage (null: definition-free) when cls
  // was observed. observe: heap_mro is cls followed by its Python bases in
  // MRO order (up to the first built-in class); observes each of them not
  // yet observed (appended to newly), and returns cls's storage.
  bool lookup(ClassKey cls, const Storage** storage) const;
  const Storage* observe(const std::vector<ClassKey>& heap_mro, std::vector<ClassKey>* newly);
  // The class behind key died (its address may be reused): forget it.
  void forget(ClassKey cls);
  // The first of heap_mro[1:] with a definition, or null.
  ClassKey defined_base(const std::vector<ClassKey>& heap_mro) const;

  // The operation class of the exact pair's route, or null.
  Handle route(ClassKey source, ClassKey destination) const;

 private:
  struct PairHash {
    size_t operator()(const std::pair<ClassKey, ClassKey>& p) const noexcept;
  };
  std::unordered_map<ClassKey, Storage> definitions_;
  // Observed classes: their storage (definitions_) or none.
  std::unordered_map<ClassKey, const Storage*> observed_;
  std::unordered_map<std::pair<ClassKey, ClassKey>, Handle, PairHash> routes_;
};

}  // namespace sw::ext

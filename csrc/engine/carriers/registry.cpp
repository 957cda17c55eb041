#include "carriers/registry.hpp"

#include <functional>

namespace sw::ext {

bool fallback_permitted(const Storage* src, const Storage* dst) {
  return (!src || src->permits_fallback) && (!dst || dst->permits_fallback);
}

const char* fallback_stance(const Storage* s) {
  if (!s) return "definition-free";
  return s->permits_fallback ? "permits the elementwise fallback" : "does not permit the elementwise fallback";
}

size_t Registry::PairHash::operator()(const std::pair<ClassKey, ClassKey>& p) const noexcept {
  const size_t a = std::hash<ClassKey>()(p.first);
  return a ^ (std::hash<ClassKey>()(p.second) + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
}

RouteOwner Registry::route_owner(ClassKey cls, ClassKey source, ClassKey destination) const {
  if (source == cls) return RouteOwner::Outgoing;
  if (destination != cls) return RouteOwner::Foreign;
  return defined(source) ? RouteOwner::IncomingFromDefined : RouteOwner::Incoming;
}

RegistrationProblem Registry::registration_problem(ClassKey cls) const {
  if (defined(cls)) return RegistrationProblem::AlreadyDefined;
  if (observed_.count(cls)) return RegistrationProblem::AlreadyObserved;
  return RegistrationProblem::None;
}

void Registry::define(ClassKey cls, Storage storage, const std::vector<Route>& routes) {
  for (const Route& r : routes) routes_[{r.source, r.destination}] = r.operation;
  definitions_[cls] = storage;
}

bool Registry::lookup(ClassKey cls, const Storage** storage) const {
  auto it = observed_.find(cls);
  if (it == observed_.end()) return false;
  *storage = it->second;
  return true;
}

const Storage* Registry::observe(const std::vector<ClassKey>& heap_mro, std::vector<ClassKey>* newly) {
  for (ClassKey c : heap_mro) {
    if (observed_.count(c)) continue;
    auto d = definitions_.find(c);
    observed_.emplace(c, d == definitions_.end() ? nullptr : &d->second);
    newly->push_back(c);
  }
  if (heap_mro.empty()) return nullptr;
  return observed_.at(heap_mro.front());
}

void Registry::forget(ClassKey cls) { observed_.erase(cls); }

ClassKey Registry::defined_base(const std::vector<ClassKey>& heap_mro) const {
  for (size_t k = 1; k < heap_mro.size(); ++k)
    if (defined(heap_mro[k])) return heap_mro[k];
  return nullptr;
}

Handle Registry::route(ClassKey source, ClassKey destination) const {
  auto it = routes_.find({source, destination});
  return it == routes_.end() ? nullptr : it->second;
}

}  // namespace sw::ext

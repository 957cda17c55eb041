#include "movement/route_table.hpp"

#include <stdexcept>

namespace sw::movement {

RouteTable::~RouteTable() {
  for (const auto& [pair, op] : routes_) unpin(pair, op);
}

void RouteTable::unpin(const Pair& pair, ClassKey op) const {
  if (!pins_.release) return;
  pins_.release(op);
  pins_.release(pair.second);
  pins_.release(pair.first);
}

std::optional<ClassKey> RouteTable::add(ClassKey src, ClassKey dst, ClassKey op) {
  {
    std::lock_guard<std::mutex> lk(m_);
    auto [it, inserted] = routes_.try_emplace(Pair(src, dst), op);
    if (!inserted) return it->second;
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (pins_.retain) {
    pins_.retain(src);
    pins_.retain(dst);
    pins_.retain(op);
  }
  return std::nullopt;
}

std::optional<ClassKey> RouteTable::remove(ClassKey src, ClassKey dst) {
  ClassKey op;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = routes_.find(Pair(src, dst));
    if (it == routes_.end()) return std::nullopt;
    op = it->second;
    routes_.erase(it);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  // op's pin passes to the caller: it may hold the only reference.
  if (pins_.release) {
    pins_.release(dst);
    pins_.release(src);
  }
  return op;
}

bool RouteTable::remove_if(ClassKey src, ClassKey dst, ClassKey op) {
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = routes_.find(Pair(src, dst));
    if (it == routes_.end() || it->second != op) return false;
    routes_.erase(it);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  unpin(Pair(src, dst), op);
  return true;
}

std::optional<ClassKey> RouteTable::find(ClassKey src, ClassKey dst) const {
  std::lock_guard<std::mutex> lk(m_);
  auto it = routes_.find(Pair(src, dst));
  if (it == routes_.end()) return std::nullopt;
  return it->second;
}

ClassKey RouteTable::resolve(ClassKey src, ClassKey dst, ClassKey fallback) const {
  return find(src, dst).value_or(fallback);
}

std::size_t RouteTable::size() const {
  std::lock_guard<std::mutex> lk(m_);
  return routes_.size();
}

void RouteTable::Scope::check_enterable() const {
  if (active_) throw std::logic_error("registered_move_operation context is already entered");
}

std::optional<ClassKey> RouteTable::Scope::enter(RouteTable& table) {
  check_enterable();
  auto conflict = table.add(src_, dst_, op_);
  if (!conflict) active_ = true;
  return conflict;
}

void RouteTable::Scope::exit(RouteTable& table) {
  if (!active_) return;
  active_ = false;
  table.remove_if(src_, dst_, op_);
}

}  // namespace sw::movement

// Residency state and request registration (residency.hpp).
#include "tiled/residency.hpp"

#include <algorithm>
#include <stdexcept>

namespace sw::tiled {

const char* to_string(Location l) {
  switch (l) {
    case Location::Primary: return "primary";
    case Location::Secondary: return "secondary";
    case Location::Implicit: return "implicit";
    case Location::Invalid: return "invalid";
  }
  return "?";
}

void Residency::reset(int64_t n, Location loc, bool dirty) {
  if (n < 0) throw std::invalid_argument("a negative tile count");
  tiles_ = n;
  fill_ = static_cast<uint8_t>(static_cast<uint8_t>(loc) | (dirty ? kDirty : 0));
  pages_.clear();
  pages_.resize(static_cast<size_t>((n + kPageTiles - 1) >> kPageBits));
  for (int64_t& c : count_) c = 0;
  count_[static_cast<int>(loc)] = n;
  dirty_count_ = dirty ? n : 0;
  buffers_.clear();
  readers_.clear();
  writers_.clear();
  retained_.clear();
  deferred_.clear();
  all_readers_ = residency_writes_ = pending_ = 0;
}

uint8_t& Residency::slot(int64_t k) {
  auto& page = pages_[static_cast<size_t>(k >> kPageBits)];
  if (!page) {
    page.reset(new uint8_t[kPageTiles]);
    std::fill(page.get(), page.get() + kPageTiles, fill_);
  }
  return page[static_cast<size_t>(k & (kPageTiles - 1))];
}

Buffer Residency::buffer(int64_t k) const {
  auto it = buffers_.find(k);
  return it == buffers_.end() ? nullptr : it->second;
}

std::vector<Buffer> Residency::buffers() const {
  std::vector<Buffer> out;
  out.reserve(buffers_.size());
  for (const auto& [k, b] : buffers_) out.push_back(b);
  return out;
}

void Residency::set(int64_t k, Location loc, bool dirty, Buffer buffer, std::vector<Buffer>* freed) {
  uint8_t& b = slot(k);
  const uint8_t s = b;
  --count_[s & kLoc];
  ++count_[static_cast<int>(loc)];
  dirty_count_ += (dirty ? 1 : 0) - ((s & kDirty) ? 1 : 0);
  b = static_cast<uint8_t>((s & kBusy) | static_cast<uint8_t>(loc) | (dirty ? kDirty : 0));
  if (loc != Location::Primary) buffer = nullptr;
  auto it = buffers_.find(k);
  Buffer old = it == buffers_.end() ? nullptr : it->second;
  if (old == buffer) return;
  if (old && freed) freed->push_back(old);
  if (buffer)
    buffers_[k] = buffer;
  else if (it != buffers_.end())
    buffers_.erase(it);
}

int64_t Residency::readers(int64_t k) const {
  auto it = readers_.find(k);
  return all_readers_ + (it == readers_.end() ? 0 : it->second);
}

const Request* Residency::writer(int64_t k) const {
  if (!(byte(k) & kBusy)) return nullptr;
  auto it = writers_.find(k);
  return it == writers_.end() ? nullptr : it->second;
}

bool Residency::in_residency_request(int64_t k) const {
  const Request* w = writer(k);
  return w && w->kind == Request::Kind::Residency;
}

int64_t Residency::residency_conflict(const std::vector<int64_t>& tiles) const {
  for (int64_t k : tiles)
    if (busy(k)) return k;
  return -1;
}

int64_t Residency::data_conflict(const std::vector<int64_t>& tiles) const {
  if (!residency_writes_) return -1;
  for (int64_t k : tiles)
    if (in_residency_request(k)) return k;
  return -1;
}

int64_t Residency::data_conflict_all() const {
  if (!residency_writes_) return -1;
  for (const auto& [k, r] : writers_)
    if (r->kind == Request::Kind::Residency) return k;
  return -1;
}

int64_t Residency::first_invalid(const std::vector<int64_t>& tiles) const {
  if (!count(Location::Invalid)) return -1;
  for (int64_t k : tiles)
    if (!valid(k)) return k;
  return -1;
}

int64_t Residency::first_invalid_all() const {
  if (!count(Location::Invalid)) return -1;
  for (size_t p = 0; p < pages_.size(); ++p) {
    const int64_t first = static_cast<int64_t>(p) << kPageBits;
    if (!pages_[p]) {
      if ((fill_ & kLoc) == static_cast<uint8_t>(Location::Invalid)) return first;
      continue;
    }
    const int64_t n = std::min(kPageTiles, tiles_ - first);
    for (int64_t i = 0; i < n; ++i)
      if ((pages_[p][static_cast<size_t>(i)] & kLoc) == static_cast<uint8_t>(Location::Invalid)) return first + i;
  }
  return -1;
}

void Residency::refresh_busy(int64_t k) {
  const bool b = readers_.count(k) || writers_.count(k);
  uint8_t& s = slot(k);
  s = static_cast<uint8_t>(b ? (s | kBusy) : (s & ~kBusy));
}

void Residency::register_request(Request& r) {
  if (r.registered) throw std::logic_error("a tiled request registered twice");
  if (r.reads_all) ++all_readers_;
  for (int64_t k : r.reads) {
    ++readers_[k];
    slot(k) |= kBusy;
  }
  for (int64_t k : r.writes) {
    writers_[k] = &r;
    slot(k) |= kBusy;
  }
  if (r.kind == Request::Kind::Residency) residency_writes_ += static_cast<int64_t>(r.writes.size());
  for (int64_t k : r.retains) ++retained_[k];
  r.registered = true;
  ++pending_;
}

void Residency::commit(Request& r, std::vector<Buffer>* freed) {
  for (const Request::Change& c : r.changes) set(c.tile, c.location, c.dirty, c.buffer, freed);
  r.changes.clear();
}

void Residency::unregister(Request& r) {
  if (!r.registered) return;
  r.registered = false;
  --pending_;
  if (r.reads_all) --all_readers_;
  for (int64_t k : r.reads) {
    auto it = readers_.find(k);
    if (it != readers_.end() && --it->second == 0) readers_.erase(it);
    refresh_busy(k);
  }
  for (int64_t k : r.writes) {
    auto it = writers_.find(k);
    if (it != writers_.end() && it->second == &r) {
      writers_.erase(it);
      if (r.kind == Request::Kind::Residency) --residency_writes_;
    }
    refresh_busy(k);
  }
  for (int64_t k : r.retains) {
    auto it = retained_.find(k);
    if (it != retained_.end() && --it->second == 0) retained_.erase(it);
  }
}

std::vector<int64_t> Residency::take_ready_deferred() {
  std::vector<int64_t> out;
  if (deferred_.empty()) return out;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    const int64_t k = *it;
    if (readers(k) == 0 && !writers_.count(k) && !retained_.count(k)) {
      out.push_back(k);
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void Residency::forget_requests() {
  for (const auto& [k, n] : readers_) slot(k) &= static_cast<uint8_t>(~kBusy);
  for (const auto& [k, r] : writers_) slot(k) &= static_cast<uint8_t>(~kBusy);
  readers_.clear();
  writers_.clear();
  retained_.clear();
  deferred_.clear();
  all_readers_ = residency_writes_ = pending_ = 0;
}

}  // namespace sw::tiled

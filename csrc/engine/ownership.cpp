#include "ownership.hpp"

#include <atomic>

namespace sw {

namespace {
std::atomic<int64_t> g_next_token{1};
}

int64_t Ownership::claim() {
  if (token_ != 0) return 0;
  token_ = g_next_token.fetch_add(1);
  access_.clear();
  return token_;
}

bool Ownership::relinquish(int64_t token) {
  if (token_ == 0 || token != token_) return false;
  token_ = 0;
  access_.clear();
  return true;
}

bool Ownership::begin_access(int64_t token, uint64_t tid) {
  if (token_ == 0 || token != token_) return false;
  for (auto& a : access_) {
    if (a.first == tid) { ++a.second; return true; }
  }
  access_.emplace_back(tid, 1);
  return true;
}

bool Ownership::end_access(int64_t token, uint64_t tid) {
  if (token_ == 0 || token != token_) return false;
  for (size_t i = 0; i < access_.size(); ++i) {
    if (access_[i].first == tid) {
      if (--access_[i].second == 0) access_.erase(access_.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

bool Ownership::has_access(uint64_t tid) const {
  for (const auto& a : access_) if (a.first == tid) return true;
  return false;
}

}  // namespace sw

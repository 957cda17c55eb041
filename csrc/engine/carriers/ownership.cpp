#include "carriers/ownership.hpp"

#include <cstddef>
#include <random>
#if defined(__linux__)
#include <sys/random.h>
#endif

namespace sw {

namespace {

// Tokens are capabilities (whoever holds one may relinquish or open owner
// access), so they come from the operating system's CSPRNG, not a counter:
// a guessed token must not free storage under a pending move. Drawn in
// batches per thread so a claim costs a syscall only every 64 claims.
class TokenSource {
 public:
  int64_t next() {
    for (;;) {
      if (pos_ == kBatch) refill();
      const uint64_t v = buf_[pos_++] & 0x7fffffffffffffffULL;  // positive: 0 means "not owned"
      if (v != 0) return static_cast<int64_t>(v);
    }
  }

 private:
  static constexpr size_t kBatch = 64;
  void refill() {
    size_t got = 0;
#if defined(__linux__)
    auto* bytes = reinterpret_cast<unsigned char*>(buf_);
    while (got < sizeof(buf_)) {
      const ssize_t r = getrandom(bytes + got, sizeof(buf_) - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
#endif
    if (got < sizeof(buf_)) {
      std::random_device rd;
      for (auto& w : buf_) w = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
    pos_ = 0;
  }
  uint64_t buf_[kBatch] = {};
  size_t pos_ = kBatch;
};

int64_t fresh_token() {
  thread_local TokenSource source;
  return source.next();
}

}  // namespace

int64_t Ownership::claim() {
  if (token_ != 0) return 0;
  token_ = fresh_token();
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

// Ownership tokens of the carrier base: a carrier is owned by at most one
// token holder (another carrier or a pending move). Owner access is a
// re-entrant, thread-bound scope that makes the owned carrier publicly
// mutable again on that thread. All calls happen under the GIL in the
// binding layer, so the state needs no lock of its own.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace sw {

class Ownership {
 public:
  // 0 when already owned; otherwise a fresh token: positive, 63 random bits
  // from the OS CSPRNG (unguessable, so it works as a capability).
  int64_t claim();
  // false when token does not match the current owner.
  bool relinquish(int64_t token);
  bool begin_access(int64_t token, uint64_t thread_id);
  bool end_access(int64_t token, uint64_t thread_id);
  bool is_owned() const { return token_ != 0; }
  int64_t token() const { return token_; }
  bool has_access(uint64_t thread_id) const;

 private:
  int64_t token_ = 0;
  std::vector<std::pair<uint64_t, int>> access_;  // thread id -> depth
};

}  // namespace sw

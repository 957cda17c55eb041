// How a directly called built-in _copy may use one participant carrier.
// Such a call can come outside any move, on carriers nobody has claimed;
// releasing the interpreter lock over them would let a concurrent release()
// free the storage under the copy. So a participant nobody owns is claimed
// for the copy; one owned by the move running this _copy is used as it is
// (nobody else can touch it); one owned otherwise is copied with the lock
// held (its owner may act from another thread), and written only by a
// thread holding owner access.
#pragma once
#include <cstdint>

#include "carriers/ownership.hpp"

namespace sw::movement {

enum class CopyAccess {
  Claim,   // claim it for the copy, relinquish afterwards
  AsIs,    // owned by the running move
  Locked,  // owned by someone else: copy with the lock held
};

// own: the carrier's ownership; running_token: the token the move running
// on this thread holds on this carrier (0 when none runs or the carrier is
// not one of its participants). Throws std::runtime_error naming type_name
// when the carrier is written and owned by someone else without this
// thread holding owner access.
CopyAccess copy_access(const Ownership& own, int64_t running_token, bool written, uint64_t thread_id,
                       const char* type_name);

}  // namespace sw::movement

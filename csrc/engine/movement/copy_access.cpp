#include "movement/copy_access.hpp"

#include <stdexcept>
#include <string>

namespace sw::movement {

CopyAccess copy_access(const Ownership& own, int64_t running_token, bool written, uint64_t thread_id,
                       const char* type_name) {
  if (!own.is_owned()) return CopyAccess::Claim;
  if (own.token() == running_token) return CopyAccess::AsIs;
  if (written && !own.has_access(thread_id))
    throw std::runtime_error(std::string("_copy() destination ") + type_name +
                             " carrier is owned by another carrier or a pending move; it can be written only with "
                             "owner access");
  return CopyAccess::Locked;
}

}  // namespace sw::movement

// Evictable's rules over plain descriptions of its tiers: the construction
// checks in the order they apply, and the residency state (which tier holds
// the values, the ownership tokens the Evictable holds) with its
// transitions. The binding gathers each fact from the tier carriers (some
// through Python hooks) just before the check that needs it, so a hook is
// never asked once an earlier rule has failed, and formats the violation.
#pragma once
#include <cstdint>

#include "dtype/dtype.hpp"

namespace sw::evictable {

enum class Tier : uint8_t { Primary, Secondary };
const char* role(Tier t);  // "primary" / "secondary"

enum class Rule : uint8_t {
  Ok,
  NotDistinct,         // primary is secondary
  Released,            // a tier is released
  Owned,               // a tier is owned by another carrier or a pending move
  DtypeMismatch,       // the tiers' dtypes differ
  DtypeNotSimple,      // the common dtype is not a built-in simple one
  SecondaryImmutable,  // eviction writes into the secondary
  PrimaryEmpty,
  EdgeNotRegistered,   // a Metal tier needs registered operations both ways
};

struct Violation {
  Rule rule = Rule::Ok;
  Tier tier = Tier::Primary;
  explicit operator bool() const { return rule != Rule::Ok; }
};

// What construction knows of a tier before asking any hook.
struct TierFacts {
  bool released = false;
  bool owned = false;
};

// The construction checks, one call per stage, in this order.
class Validator {
 public:
  // Distinct tiers, then live ones (primary first), then unowned ones.
  Violation identity(bool same_object, TierFacts primary, TierFacts secondary) const;
  Violation dtypes(bool equal, bool simple) const;
  Violation secondary_mutable(bool is_mutable) const;
  // Records the primary's size: what promote() allocates. The secondary's
  // size is no construction rule: eviction fits it (fit_secondary).
  Violation primary_size(int64_t n);
  // One edge between the tiers: the elementwise fallback is refused when a
  // tier is Metal (its ordering rules need a registered bulk operation).
  Violation edge(bool metal_tier, bool elementwise_fallback) const;
  int64_t slots() const { return slots_; }

 private:
  int64_t slots_ = 0;
};

// What eviction does with a secondary of secondary_size slots for a primary
// of slots: copy into it (Fits), grow it first (Grow: it is empty; when it
// cannot grow it is replaced), or replace it with a fresh carrier of its
// class (Replace: non-empty and too small; the replaced one is released once
// the eviction succeeded).
enum class SecondaryFit : uint8_t { Fits, Grow, Replace };
SecondaryFit fit_secondary(int64_t secondary_size, int64_t slots);

// The state of a constructed Evictable.
class Residency {
 public:
  // Construction succeeded: both tiers claimed with these tokens (once).
  void attach(int64_t primary_token, int64_t secondary_token, int64_t slots, DTypeCode dtype);
  bool attached() const { return attached_; }
  bool evicted() const { return evicted_; }
  // The tier holding the values (size() and reads follow it).
  Tier resident() const { return evicted_ ? Tier::Secondary : Tier::Primary; }
  int64_t slots() const { return slots_; }
  DTypeCode dtype() const { return dtype_; }
  // The token the Evictable holds on tier t (0: none).
  int64_t token(Tier t) const { return t == Tier::Primary ? primary_token_ : secondary_token_; }

  // evict(): the values are in the secondary and the primary was given up.
  void evicted_primary_released();
  // evict() could not release the primary: it was claimed again with token
  // (0 when even that failed); still promoted.
  void reclaimed_primary(int64_t token);
  // promote(): a fresh primary claimed with token holds the values.
  void promoted(int64_t token);
  // evict() replaced the secondary with a fresh one claimed with token.
  void replaced_secondary(int64_t token);
  // release() / collection: the token held on t, forgotten (0: none).
  int64_t take_token(Tier t);

 private:
  int64_t primary_token_ = 0;
  int64_t secondary_token_ = 0;
  int64_t slots_ = 0;
  DTypeCode dtype_ = DTypeCode::Float32;
  bool evicted_ = false;
  bool attached_ = false;
};

}  // namespace sw::evictable

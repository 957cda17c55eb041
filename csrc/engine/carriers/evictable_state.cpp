#include "carriers/evictable_state.hpp"

namespace sw::evictable {

const char* role(Tier t) { return t == Tier::Primary ? "primary" : "secondary"; }

Violation Validator::identity(bool same_object, TierFacts primary, TierFacts secondary) const {
  if (same_object) return {Rule::NotDistinct, Tier::Primary};
  if (primary.released) return {Rule::Released, Tier::Primary};
  if (secondary.released) return {Rule::Released, Tier::Secondary};
  if (primary.owned) return {Rule::Owned, Tier::Primary};
  if (secondary.owned) return {Rule::Owned, Tier::Secondary};
  return {};
}

Violation Validator::dtypes(bool equal, bool simple) const {
  if (!equal) return {Rule::DtypeMismatch, Tier::Secondary};
  if (!simple) return {Rule::DtypeNotSimple, Tier::Primary};
  return {};
}

Violation Validator::secondary_mutable(bool is_mutable) const {
  if (!is_mutable) return {Rule::SecondaryImmutable, Tier::Secondary};
  return {};
}

Violation Validator::primary_size(int64_t n) {
  if (n == 0) return {Rule::PrimaryEmpty, Tier::Primary};
  slots_ = n;
  return {};
}

SecondaryFit fit_secondary(int64_t secondary_size, int64_t slots) {
  if (secondary_size >= slots) return SecondaryFit::Fits;
  return secondary_size == 0 ? SecondaryFit::Grow : SecondaryFit::Replace;
}

Violation Validator::edge(bool metal_tier, bool elementwise_fallback) const {
  if (metal_tier && elementwise_fallback) return {Rule::EdgeNotRegistered, Tier::Primary};
  return {};
}

void Residency::attach(int64_t primary_token, int64_t secondary_token, int64_t slots, DTypeCode dtype) {
  primary_token_ = primary_token;
  secondary_token_ = secondary_token;
  slots_ = slots;
  dtype_ = dtype;
  evicted_ = false;
  attached_ = true;
}

void Residency::evicted_primary_released() {
  primary_token_ = 0;
  evicted_ = true;
}

void Residency::reclaimed_primary(int64_t token) { primary_token_ = token; }

void Residency::promoted(int64_t token) {
  primary_token_ = token;
  evicted_ = false;
}

void Residency::replaced_secondary(int64_t token) { secondary_token_ = token; }

int64_t Residency::take_token(Tier t) {
  int64_t& slot = t == Tier::Primary ? primary_token_ : secondary_token_;
  const int64_t token = slot;
  slot = 0;
  return token;
}

}  // namespace sw::evictable

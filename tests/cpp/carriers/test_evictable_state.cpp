// sw::evictable: the construction rules in their order, and the residency
// state through evict / promote / failed release / drop.
#include <gtest/gtest.h>

#include "carriers/evictable_state.hpp"

namespace E = sw::evictable;

namespace {

TEST(EvictableRules, IdentityOrder) {
  const E::Validator rules;
  const E::TierFacts live{}, released{true, false}, owned{false, true}, both{true, true};
  EXPECT_FALSE(rules.identity(false, live, live));
  // Distinctness first, even when the tier is released too.
  EXPECT_EQ(rules.identity(true, released, released).rule, E::Rule::NotDistinct);
  auto v = rules.identity(false, live, released);
  EXPECT_EQ(v.rule, E::Rule::Released);
  EXPECT_EQ(v.tier, E::Tier::Secondary);
  // Released before owned, primary before secondary within a rule.
  v = rules.identity(false, owned, released);
  EXPECT_EQ(v.rule, E::Rule::Released);
  EXPECT_EQ(v.tier, E::Tier::Secondary);
  v = rules.identity(false, both, both);
  EXPECT_EQ(v.rule, E::Rule::Released);
  EXPECT_EQ(v.tier, E::Tier::Primary);
  v = rules.identity(false, live, owned);
  EXPECT_EQ(v.rule, E::Rule::Owned);
  EXPECT_EQ(v.tier, E::Tier::Secondary);
  EXPECT_EQ(rules.identity(false, owned, owned).tier, E::Tier::Primary);
}

TEST(EvictableRules, DtypesAndMutability) {
  const E::Validator rules;
  EXPECT_FALSE(rules.dtypes(true, true));
  EXPECT_EQ(rules.dtypes(false, true).rule, E::Rule::DtypeMismatch);
  EXPECT_EQ(rules.dtypes(false, false).rule, E::Rule::DtypeMismatch);  // mismatch is reported first
  EXPECT_EQ(rules.dtypes(true, false).rule, E::Rule::DtypeNotSimple);
  EXPECT_FALSE(rules.secondary_mutable(true));
  auto v = rules.secondary_mutable(false);
  EXPECT_EQ(v.rule, E::Rule::SecondaryImmutable);
  EXPECT_EQ(v.tier, E::Tier::Secondary);
}

TEST(EvictableRules, Sizes) {
  E::Validator rules;
  EXPECT_EQ(rules.primary_size(0).rule, E::Rule::PrimaryEmpty);
  EXPECT_FALSE(rules.primary_size(4));
  EXPECT_EQ(rules.slots(), 4);
}

TEST(EvictableRules, EvictionFitsTheSecondary) {
  EXPECT_EQ(E::fit_secondary(4, 4), E::SecondaryFit::Fits);
  EXPECT_EQ(E::fit_secondary(9, 4), E::SecondaryFit::Fits);
  EXPECT_EQ(E::fit_secondary(0, 4), E::SecondaryFit::Grow);  // replaced when it cannot grow
  EXPECT_EQ(E::fit_secondary(3, 4), E::SecondaryFit::Replace);
  EXPECT_EQ(E::fit_secondary(1, 4), E::SecondaryFit::Replace);
}

TEST(EvictableRules, MetalEdgesNeedRegisteredOperations) {
  const E::Validator rules;
  EXPECT_FALSE(rules.edge(false, true));
  EXPECT_FALSE(rules.edge(true, false));
  EXPECT_FALSE(rules.edge(false, false));
  EXPECT_EQ(rules.edge(true, true).rule, E::Rule::EdgeNotRegistered);
}

TEST(EvictableRules, Roles) {
  EXPECT_STREQ(E::role(E::Tier::Primary), "primary");
  EXPECT_STREQ(E::role(E::Tier::Secondary), "secondary");
}

TEST(EvictableResidency, Lifecycle) {
  E::Residency r;
  EXPECT_FALSE(r.attached());
  EXPECT_EQ(r.token(E::Tier::Primary), 0);
  r.attach(11, 22, 5, sw::DTypeCode::Int32);
  EXPECT_TRUE(r.attached());
  EXPECT_FALSE(r.evicted());
  EXPECT_EQ(r.resident(), E::Tier::Primary);
  EXPECT_EQ(r.slots(), 5);
  EXPECT_EQ(r.dtype(), sw::DTypeCode::Int32);
  EXPECT_EQ(r.token(E::Tier::Primary), 11);
  EXPECT_EQ(r.token(E::Tier::Secondary), 22);

  r.evicted_primary_released();
  EXPECT_TRUE(r.evicted());
  EXPECT_EQ(r.resident(), E::Tier::Secondary);
  EXPECT_EQ(r.token(E::Tier::Primary), 0);
  EXPECT_EQ(r.token(E::Tier::Secondary), 22);

  r.promoted(33);
  EXPECT_FALSE(r.evicted());
  EXPECT_EQ(r.resident(), E::Tier::Primary);
  EXPECT_EQ(r.token(E::Tier::Primary), 33);
  EXPECT_EQ(r.slots(), 5);  // promote() allocates the original size every time
}

TEST(EvictableResidency, FailedReleaseReclaimsThePrimary) {
  E::Residency r;
  r.attach(1, 2, 3, sw::DTypeCode::Float32);
  r.reclaimed_primary(7);
  EXPECT_FALSE(r.evicted());
  EXPECT_EQ(r.token(E::Tier::Primary), 7);
  r.reclaimed_primary(0);  // the claim failed: no token held
  EXPECT_EQ(r.token(E::Tier::Primary), 0);
}

TEST(EvictableResidency, ReplacedSecondaryKeepsTheResidency) {
  E::Residency r;
  r.attach(1, 2, 3, sw::DTypeCode::Float32);
  r.replaced_secondary(9);
  EXPECT_EQ(r.token(E::Tier::Secondary), 9);
  EXPECT_EQ(r.token(E::Tier::Primary), 1);
  EXPECT_FALSE(r.evicted());
  r.evicted_primary_released();
  EXPECT_TRUE(r.evicted());
  EXPECT_EQ(r.token(E::Tier::Secondary), 9);
}

TEST(EvictableResidency, TakeTokenForgetsIt) {
  E::Residency r;
  r.attach(1, 2, 3, sw::DTypeCode::Float32);
  EXPECT_EQ(r.take_token(E::Tier::Primary), 1);
  EXPECT_EQ(r.take_token(E::Tier::Primary), 0);
  EXPECT_EQ(r.take_token(E::Tier::Secondary), 2);
  EXPECT_EQ(r.token(E::Tier::Secondary), 0);
  EXPECT_TRUE(r.attached());  // the tiers stay named; only the tokens went
}

}  // namespace

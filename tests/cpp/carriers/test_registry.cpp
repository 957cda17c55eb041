// sw::ext::Registry: route ownership, registration only before observation,
// observation of a class with its bases, forgetting dead classes, the
// exact-class rule, exact-pair routes and the elementwise-fallback rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "carriers/registry.hpp"

namespace X = sw::ext;

namespace {

// Distinct addresses standing in for classes and handles.
int A, B, C, D, ProviderA, ProviderB, OpAB, OpDA;

TEST(CarrierRegistry, FallbackRule) {
  const X::Storage yes{&ProviderA, true}, no{&ProviderB, false};
  EXPECT_TRUE(X::fallback_permitted(nullptr, nullptr));  // the legacy contract
  EXPECT_TRUE(X::fallback_permitted(&yes, nullptr));
  EXPECT_TRUE(X::fallback_permitted(&yes, &yes));
  EXPECT_FALSE(X::fallback_permitted(&no, nullptr));
  EXPECT_FALSE(X::fallback_permitted(nullptr, &no));
  EXPECT_FALSE(X::fallback_permitted(&yes, &no));
  EXPECT_STREQ(X::fallback_stance(nullptr), "definition-free");
  EXPECT_STREQ(X::fallback_stance(&yes), "permits the elementwise fallback");
  EXPECT_STREQ(X::fallback_stance(&no), "does not permit the elementwise fallback");
}

TEST(CarrierRegistry, RouteOwnership) {
  X::Registry r;
  EXPECT_EQ(r.route_owner(&A, &A, &B), X::RouteOwner::Outgoing);
  EXPECT_EQ(r.route_owner(&A, &B, &A), X::RouteOwner::Incoming);
  EXPECT_EQ(r.route_owner(&A, &B, &C), X::RouteOwner::Foreign);
  r.define(&B, {&ProviderB, false}, {});
  EXPECT_EQ(r.route_owner(&A, &B, &A), X::RouteOwner::IncomingFromDefined);
}

TEST(CarrierRegistry, RegisteredOnceAndOnlyBeforeObservation) {
  X::Registry r;
  EXPECT_EQ(r.registration_problem(&A), X::RegistrationProblem::None);
  r.define(&A, {&ProviderA, true}, {});
  EXPECT_TRUE(r.defined(&A));
  EXPECT_EQ(r.registration_problem(&A), X::RegistrationProblem::AlreadyDefined);
  std::vector<X::ClassKey> newly;
  EXPECT_EQ(r.observe({&B}, &newly), nullptr);
  EXPECT_EQ(r.registration_problem(&B), X::RegistrationProblem::AlreadyObserved);
}

TEST(CarrierRegistry, ObservationSealsTheBasesToo) {
  X::Registry r;
  r.define(&B, {&ProviderB, true}, {});
  std::vector<X::ClassKey> newly;
  // C derives from B derives from D (MRO order, built-ins excluded).
  const X::Storage* s = r.observe({&C, &B, &D}, &newly);
  EXPECT_EQ(s, nullptr);  // C itself is definition-free
  EXPECT_EQ(newly, (std::vector<X::ClassKey>{&C, &B, &D}));
  const X::Storage* got = nullptr;
  ASSERT_TRUE(r.lookup(&B, &got));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->provider, &ProviderB);
  ASSERT_TRUE(r.lookup(&D, &got));
  EXPECT_EQ(got, nullptr);
  // Observing again adds nothing; a definition for a sealed base is refused.
  newly.clear();
  EXPECT_EQ(r.observe({&B, &D}, &newly)->provider, &ProviderB);
  EXPECT_TRUE(newly.empty());
  EXPECT_EQ(r.registration_problem(&D), X::RegistrationProblem::AlreadyObserved);
  EXPECT_FALSE(r.lookup(&A, &got));
}

TEST(CarrierRegistry, ForgottenClassesStartOver) {
  X::Registry r;
  std::vector<X::ClassKey> newly;
  r.observe({&A}, &newly);
  r.forget(&A);  // the class died; a new class may get its address
  const X::Storage* got;
  EXPECT_FALSE(r.lookup(&A, &got));
  EXPECT_EQ(r.registration_problem(&A), X::RegistrationProblem::None);
  r.define(&A, {&ProviderA, false}, {});
  newly.clear();
  EXPECT_EQ(r.observe({&A}, &newly)->provider, &ProviderA);
}

TEST(CarrierRegistry, DefinitionsAreExactClass) {
  X::Registry r;
  r.define(&B, {&ProviderB, true}, {});
  EXPECT_EQ(r.defined_base({&C, &D, &B}), &B);
  EXPECT_EQ(r.defined_base({&B, &D}), nullptr);  // the class itself does not count
  EXPECT_EQ(r.defined_base({&C}), nullptr);
  EXPECT_EQ(r.defined_base({}), nullptr);
}

TEST(CarrierRegistry, RoutesAreExactPairs) {
  X::Registry r;
  r.define(&A, {&ProviderA, false}, {{&A, &B, &OpAB}, {&D, &A, &OpDA}});
  EXPECT_EQ(r.route(&A, &B), &OpAB);
  EXPECT_EQ(r.route(&D, &A), &OpDA);
  EXPECT_EQ(r.route(&B, &A), nullptr);
  EXPECT_EQ(r.route(&A, &D), nullptr);
  EXPECT_EQ(r.route(&C, &B), nullptr);
}

}  // namespace

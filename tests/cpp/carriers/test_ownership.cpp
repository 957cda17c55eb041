// sw::Ownership: tokens and thread-bound, re-entrant owner access.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "carriers/ownership.hpp"

TEST(Ownership, ClaimRelinquish) {
  sw::Ownership o;
  EXPECT_FALSE(o.is_owned());
  int64_t t = o.claim();
  EXPECT_NE(t, 0);
  EXPECT_TRUE(o.is_owned());
  EXPECT_EQ(o.token(), t);
  EXPECT_EQ(o.claim(), 0);  // already owned
  EXPECT_FALSE(o.relinquish(t + 1));
  EXPECT_TRUE(o.is_owned());
  EXPECT_TRUE(o.relinquish(t));
  EXPECT_FALSE(o.is_owned());
  EXPECT_FALSE(o.relinquish(t));  // no owner any more
}

TEST(Ownership, TokensAreFresh) {
  sw::Ownership a, b;
  int64_t t1 = a.claim();
  a.relinquish(t1);
  int64_t t2 = a.claim();
  int64_t t3 = b.claim();
  EXPECT_NE(t1, t2);
  EXPECT_NE(t2, t3);
  EXPECT_FALSE(a.relinquish(t1));  // a stale token does not match
}

TEST(Ownership, AccessIsReentrantAndThreadBound) {
  sw::Ownership o;
  int64_t t = o.claim();
  EXPECT_FALSE(o.has_access(1));
  EXPECT_TRUE(o.begin_access(t, 1));
  EXPECT_TRUE(o.begin_access(t, 1));
  EXPECT_TRUE(o.has_access(1));
  EXPECT_FALSE(o.has_access(2));
  EXPECT_TRUE(o.end_access(t, 1));
  EXPECT_TRUE(o.has_access(1));  // one scope still open
  EXPECT_TRUE(o.end_access(t, 1));
  EXPECT_FALSE(o.has_access(1));
  EXPECT_FALSE(o.end_access(t, 1));  // nothing open on this thread
}

TEST(Ownership, AccessNeedsMatchingToken) {
  sw::Ownership o;
  EXPECT_FALSE(o.begin_access(5, 1));  // unowned
  int64_t t = o.claim();
  EXPECT_FALSE(o.begin_access(t + 1, 1));
  EXPECT_FALSE(o.has_access(1));
  EXPECT_TRUE(o.begin_access(t, 1));
  EXPECT_FALSE(o.end_access(t + 1, 1));
  EXPECT_TRUE(o.has_access(1));
}

TEST(Ownership, RelinquishDropsAccess) {
  sw::Ownership o;
  int64_t t = o.claim();
  o.begin_access(t, 1);
  o.begin_access(t, 2);
  EXPECT_TRUE(o.relinquish(t));
  EXPECT_FALSE(o.has_access(1));
  EXPECT_FALSE(o.has_access(2));
  int64_t t2 = o.claim();
  EXPECT_FALSE(o.has_access(1));  // a new owner starts with no access
  EXPECT_FALSE(o.end_access(t2, 1));
}

TEST(Ownership, TokensArePositiveDistinctAndNotACounter) {
  std::vector<int64_t> tokens;
  std::set<int64_t> distinct;
  for (int i = 0; i < 256; ++i) {
    sw::Ownership o;
    const int64_t t = o.claim();
    EXPECT_GT(t, 0);
    tokens.push_back(t);
    distinct.insert(t);
  }
  EXPECT_EQ(distinct.size(), tokens.size());
  std::set<int64_t> steps;
  for (size_t i = 1; i < tokens.size(); ++i) steps.insert(tokens[i] - tokens[i - 1]);
  EXPECT_GT(steps.size(), 1u);                 // no fixed step
  EXPECT_GT(*distinct.rbegin(), int64_t{1} << 40);  // drawn from 63 random bits
}

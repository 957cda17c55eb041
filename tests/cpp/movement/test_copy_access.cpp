#include <gtest/gtest.h>

#include <stdexcept>

#include "carriers/ownership.hpp"
#include "movement/copy_access.hpp"

using sw::Ownership;
using sw::movement::copy_access;
using sw::movement::CopyAccess;

TEST(CopyAccess, UnownedCarriersAreClaimed) {
  Ownership own;
  EXPECT_EQ(copy_access(own, 0, false, 1, "CPU"), CopyAccess::Claim);
  EXPECT_EQ(copy_access(own, 0, true, 1, "CPU"), CopyAccess::Claim);
}

TEST(CopyAccess, TheRunningMovesCarriersAreUsedAsTheyAre) {
  Ownership own;
  const int64_t token = own.claim();
  ASSERT_GT(token, 0);
  EXPECT_EQ(copy_access(own, token, false, 1, "CPU"), CopyAccess::AsIs);
  EXPECT_EQ(copy_access(own, token, true, 1, "CPU"), CopyAccess::AsIs);
}

TEST(CopyAccess, OtherOwnersReadWithTheLockHeld) {
  Ownership own;
  const int64_t token = own.claim();
  EXPECT_EQ(copy_access(own, 0, false, 1, "CPU"), CopyAccess::Locked);
  EXPECT_EQ(copy_access(own, token + 1, false, 1, "CPU"), CopyAccess::Locked);
}

TEST(CopyAccess, WritingAnOwnedCarrierNeedsOwnerAccess) {
  Ownership own;
  const int64_t token = own.claim();
  try {
    copy_access(own, 0, true, 7, "FileBacked");
    FAIL() << "wrote an owned carrier without access";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "_copy() destination FileBacked carrier is owned by another carrier or a pending move; it can be "
                 "written only with owner access");
  }
  ASSERT_TRUE(own.begin_access(token, 7));
  EXPECT_EQ(copy_access(own, 0, true, 7, "FileBacked"), CopyAccess::Locked);
  EXPECT_THROW(copy_access(own, 0, true, 8, "FileBacked"), std::runtime_error);  // another thread
  ASSERT_TRUE(own.end_access(token, 7));
  EXPECT_THROW(copy_access(own, 0, true, 7, "FileBacked"), std::runtime_error);
}

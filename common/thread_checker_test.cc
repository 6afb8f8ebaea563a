#include "common/thread_checker.h"

#include <thread>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(ThreadCheckerTest, FirstCallerOwns) {
  ThreadChecker checker;
  EXPECT_TRUE(checker.IsOnOwnerThread());
  bool other = true;
  std::thread([&] { other = checker.IsOnOwnerThread(); }).join();
  EXPECT_FALSE(other);
  EXPECT_TRUE(checker.IsOnOwnerThread());
}

TEST(ThreadCheckerTest, DetachHandsOwnershipOver) {
  ThreadChecker checker;
  EXPECT_TRUE(checker.IsOnOwnerThread());
  checker.Detach();
  bool other = false;
  std::thread([&] { other = checker.IsOnOwnerThread(); }).join();
  EXPECT_TRUE(other);
  EXPECT_FALSE(checker.IsOnOwnerThread());
}

}  // namespace
}  // namespace lockstep

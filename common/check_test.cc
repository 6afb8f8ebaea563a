#include "common/check.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(CheckDeathTest, FailedCheckAbortsWithConditionAndMessage) {
  int capacity = 4;
  EXPECT_DEATH(LOCKSTEP_CHECK(capacity > 8) << "cache " << 17,
               "check failed: capacity > 8 cache 17");
}

TEST(CheckDeathTest, CheckOkAbortsWithTheStatus) {
  EXPECT_DEATH(LOCKSTEP_CHECK_OK(absl::InternalError("boom")) << "while testing",
               "INTERNAL: boom while testing");
}

TEST(CheckTest, PassingChecksDoNotEvaluateTheMessage) {
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  LOCKSTEP_CHECK(true) << count();
  LOCKSTEP_CHECK_OK(absl::OkStatus()) << count();
  LOCKSTEP_DCHECK(true) << count();
  EXPECT_EQ(evaluated, 0);
}

TEST(CheckTest, CheckEvaluatesConditionOnce) {
  int calls = 0;
  LOCKSTEP_CHECK(++calls == 1);
  EXPECT_EQ(calls, 1);
}

#ifndef NDEBUG
TEST(CheckDeathTest, DcheckAbortsInDebugBuilds) {
  EXPECT_DEATH(LOCKSTEP_DCHECK(1 + 1 == 3), "check failed: 1 \\+ 1 == 3");
}
#endif

}  // namespace
}  // namespace lockstep

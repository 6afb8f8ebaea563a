#include "common/testing/status_matchers.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchersTest, IsOkOnStatusAndStatusOr) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("y")), Not(IsOk()));
}

TEST(StatusMatchersTest, StatusIsChecksCodeAndMessage) {
  const absl::Status s = absl::InvalidArgumentError("history length cannot decrease");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot decrease")));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceed"))));
  EXPECT_THAT(absl::StatusOr<int>(absl::ResourceExhaustedError("blocks")),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace lockstep::testing

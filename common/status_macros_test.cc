#include "common/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("asked to fail") : absl::OkStatus();
}

absl::Status Chain(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

absl::StatusOr<int> Doubled(int v) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(v));  // move-only value
  return *p * 2;
}

absl::StatusOr<int> SumTwo(int a, int b) {
  ASSIGN_OR_RETURN(int x, Doubled(a));  // two uses in one scope need unique temporaries
  ASSIGN_OR_RETURN(int y, Doubled(b));
  return x + y;
}

TEST(StatusMacrosTest, ReturnIfErrorPassesOkThrough) {
  int reached = 0;
  EXPECT_THAT(Chain(false, &reached), IsOk());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheError) {
  int reached = 0;
  EXPECT_THAT(Chain(true, &reached), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(reached, 0);
}

TEST(StatusMacrosTest, AssignOrReturnMovesValue) {
  absl::StatusOr<int> v = Doubled(21);
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(*v, 42);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesError) {
  EXPECT_THAT(Doubled(-1), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(SumTwo(1, -1), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(*SumTwo(1, 2), 6);
}

TEST(StatusMacrosTest, AssignOrReturnToExistingVariable) {
  auto f = []() -> absl::Status {
    int x = 0;
    ASSIGN_OR_RETURN(x, Doubled(5));
    return x == 10 ? absl::OkStatus() : absl::InternalError("wrong value");
  };
  EXPECT_THAT(f(), IsOk());
}

}  // namespace
}  // namespace lockstep

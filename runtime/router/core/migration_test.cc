#include "runtime/router/core/migration.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(MigrationTest, OnlyWorkerErrorsThatBlameTheInstanceMigrate) {
  EXPECT_TRUE(WorkerErrorMigrates(static_cast<int32_t>(absl::StatusCode::kUnavailable)));
  EXPECT_TRUE(WorkerErrorMigrates(static_cast<int32_t>(absl::StatusCode::kAborted)));
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kCancelled,
        absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kResourceExhausted,
        absl::StatusCode::kInternal, absl::StatusCode::kFailedPrecondition}) {
    EXPECT_FALSE(WorkerErrorMigrates(static_cast<int32_t>(code))) << absl::StatusCodeToString(code);
  }
}

TEST(MigrationTest, VerdictMigratesInstanceFailuresWithinTheLimit) {
  const absl::Status broken = absl::UnavailableError("instance agg0 failed while serving");
  EXPECT_THAT(
      MigrationVerdict(broken, MigrationReason::kStreamBroken, {"agg0"}, 0, 2, true, "aggregated"),
      IsOk());
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kInstanceUnhealthy, {"agg0", "agg1"}, 1, 2,
                               true, "aggregated"),
              IsOk());
  // The limit counts migrations: the third attempt's failure ends the request, and the
  // error names each attempt's route.
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kWorkerError, {"agg0", "agg1", "agg2"}, 2,
                               2, true, "aggregated"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("instance agg0 failed while serving"),
                             HasSubstr("after 3 attempts [agg0; agg1; agg2]"),
                             HasSubstr("router.migration_limit = 2 migrations"))));
  EXPECT_THAT(
      MigrationVerdict(broken, MigrationReason::kStreamBroken, {"agg0"}, 0, 0, true, "aggregated"),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("router.migration_limit = 0")));
}

TEST(MigrationTest, VerdictNeedsAnotherHealthyInstance) {
  const absl::Status broken = absl::UnavailableError("instance gen0 ended the stream");
  // One two-leg attempt is one attempt, named by its route.
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kStreamBroken, {"ctx0->gen0"}, 0, 2, false,
                               "generation"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("gen0 ended the stream"),
                             HasSubstr("no other healthy generation instance"),
                             HasSubstr("after 1 attempt [ctx0->gen0])"))));
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kKvPullFailed, {"ctx0->gen0", "ctx1->gen0"},
                               1, 2, false, "context"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("no other healthy context instance"),
                             HasSubstr("after 2 attempts [ctx0->gen0; ctx1->gen0])"))));
}

TEST(MigrationTest, AFailureAfterAMigrationNamesTheEarlierAttempts) {
  const absl::Status full = absl::ResourceExhaustedError("every healthy aggregated instance ...");
  EXPECT_EQ(AfterMigrations(full, {"agg0"}, 1),
            absl::ResourceExhaustedError(
                "every healthy aggregated instance ... (migrated 1 time; 1 attempt [agg0])"));
  EXPECT_THAT(AfterMigrations(absl::DeadlineExceededError("late"), {"agg0", "agg1", "agg2"}, 2),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("late (migrated 2 times; 3 attempts [agg0; agg1; agg2])")));
}

TEST(MigrationTest, FailuresOfTheRequestNeverMigrate) {
  // A client cancel, a validation error, the deadline: the reason is kNone and the
  // failure stands as it is.
  for (const absl::Status& failure :
       {absl::CancelledError("the client disconnected"),
        absl::InvalidArgumentError("instance agg0 failed request 1: bad token"),
        absl::DeadlineExceededError("request 1 did not finish within 600 s")}) {
    EXPECT_EQ(MigrationVerdict(failure, MigrationReason::kNone, {"agg0"}, 0, 2, true, "aggregated"),
              failure);
  }
}

TEST(MigrationTest, ReasonsHaveMetricLabels) {
  EXPECT_EQ(MigrationReasonName(MigrationReason::kStreamBroken), "stream_broken");
  EXPECT_EQ(MigrationReasonName(MigrationReason::kInstanceUnhealthy), "instance_unhealthy");
  EXPECT_EQ(MigrationReasonName(MigrationReason::kWorkerError), "worker_error");
  EXPECT_EQ(MigrationReasonName(MigrationReason::kKvPullFailed), "kv_pull_failed");
}

TEST(MigrationTest, TheLogLineOfAMigrationParsesBack) {
  const MigrationRecord record{.request_id = 17,
                               .instance = "agg0",
                               .reason = "worker_error",
                               .delivered = 5,
                               .continuation_id = 18};
  const std::string line = MigrationLogLine(record);
  EXPECT_EQ(line, "request 17 failed on agg0 (worker_error) after 5 tokens; continues as 18");
  const std::optional<MigrationRecord> parsed =
      ParseMigrationLogLine("[2026-12-01 10:00:00.000] [W] [router] " + line);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->request_id, 17u);
  EXPECT_EQ(parsed->instance, "agg0");
  EXPECT_EQ(parsed->reason, "worker_error");
  EXPECT_EQ(parsed->delivered, 5);
  EXPECT_EQ(parsed->continuation_id, 18u);
  for (const char* other :
       {"request 17 via agg0 ended: UNAVAILABLE",
        "request x failed on agg0 (r) after 5 tokens; "
        "continues as 18",
        "request 17 failed on agg0 worker_error after 5 tokens; continues as 18", ""}) {
    EXPECT_FALSE(ParseMigrationLogLine(other).has_value()) << other;
  }
}

}  // namespace
}  // namespace lockstep::router

#include "runtime/router/migration.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
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

TEST(MigrationTest, AContinuationCarriesTheDeliveredTokensAndTheRestOfTheBudget) {
  v1::GenerateRequest original;
  original.set_request_id(7);
  original.set_model("m");
  original.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
  original.mutable_context()->set_first_token_id(3);
  original.add_prompt_token_ids(10);
  original.add_prompt_token_ids(11);
  v1::SamplingParams* sampling = original.mutable_sampling();
  sampling->set_max_tokens(8);
  sampling->set_seed(99);
  sampling->set_temperature(0.7f);
  sampling->set_min_tokens(4);
  sampling->set_presence_penalty(0.5f);
  sampling->add_stop_token_ids(2);
  const std::vector<int32_t> delivered = {20, 21, 22};
  const v1::GenerateRequest next = ContinuationOf(original, delivered, 8);
  EXPECT_EQ(next.request_id(), 8u);
  EXPECT_EQ(next.model(), "m");
  EXPECT_FALSE(next.has_context());
  EXPECT_THAT(next.prompt_token_ids(), ElementsAre(10, 11, 20, 21, 22));
  EXPECT_EQ(next.sampling().max_tokens(), 5);
  EXPECT_EQ(next.sampling().num_generated_in_prompt(), 3);
  // The rest is unchanged: the same draw for each position, the same penalties.
  EXPECT_EQ(next.sampling().seed(), 99u);
  EXPECT_EQ(next.sampling().temperature(), 0.7f);
  EXPECT_EQ(next.sampling().min_tokens(), 4);
  EXPECT_EQ(next.sampling().presence_penalty(), 0.5f);
  EXPECT_THAT(next.sampling().stop_token_ids(), ElementsAre(2));
  // A continuation of a continuation counts every earlier token.
  const std::vector<int32_t> more = {23};
  const v1::GenerateRequest again = ContinuationOf(next, more, 9);
  EXPECT_THAT(again.prompt_token_ids(), ElementsAre(10, 11, 20, 21, 22, 23));
  EXPECT_EQ(again.sampling().max_tokens(), 4);
  EXPECT_EQ(again.sampling().num_generated_in_prompt(), 4);
  EXPECT_DEATH(ContinuationOf(original, std::vector<int32_t>(8, 1), 10), "nothing left");
}

TEST(MigrationTest, VerdictMigratesInstanceFailuresWithinTheLimit) {
  const absl::Status broken = absl::UnavailableError("instance agg0 failed while serving");
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kStreamBroken, {"agg0"}, 0, 2, true,
                               "aggregated"),
              IsOk());
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kInstanceUnhealthy, {"agg0", "agg1"}, 1,
                               2, true, "aggregated"),
              IsOk());
  // The limit: the error names the attempts.
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kWorkerError, {"agg0", "agg1", "agg0"}, 2,
                               2, true, "aggregated"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("instance agg0 failed while serving"),
                             HasSubstr("3 attempts on agg0, agg1, agg0"),
                             HasSubstr("router.migration_limit = 2"))));
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kStreamBroken, {"agg0"}, 0, 0, true,
                               "aggregated"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("router.migration_limit = 0")));
}

TEST(MigrationTest, VerdictNeedsAnotherHealthyInstance) {
  const absl::Status broken = absl::UnavailableError("instance gen0 ended the stream");
  EXPECT_THAT(MigrationVerdict(broken, MigrationReason::kStreamBroken, {"ctx0", "gen0"}, 0, 2,
                               false, "generation"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("gen0 ended the stream"),
                             HasSubstr("no other healthy generation instance"),
                             HasSubstr("2 attempts on ctx0, gen0"))));
}

TEST(MigrationTest, FailuresOfTheRequestNeverMigrate) {
  // A client cancel, a validation error, the deadline: the reason is kNone and the
  // failure stands as it is.
  for (const absl::Status& failure :
       {absl::CancelledError("the client disconnected"),
        absl::InvalidArgumentError("instance agg0 failed request 1: bad token"),
        absl::DeadlineExceededError("request 1 did not finish within 600 s")}) {
    EXPECT_EQ(MigrationVerdict(failure, MigrationReason::kNone, {"agg0"}, 0, 2, true,
                               "aggregated"),
              failure);
  }
}

TEST(MigrationTest, ReasonsHaveMetricLabels) {
  EXPECT_EQ(MigrationReasonName(MigrationReason::kStreamBroken), "stream_broken");
  EXPECT_EQ(MigrationReasonName(MigrationReason::kInstanceUnhealthy), "instance_unhealthy");
  EXPECT_EQ(MigrationReasonName(MigrationReason::kWorkerError), "worker_error");
}

}  // namespace
}  // namespace lockstep::router

// The executor's inter-rank messages: the step vote's reduction, and the intake and
// response encodings (round trips, and truncated input refused, never misread).
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor/intake.h"
#include "runtime/executor/response.h"
#include "runtime/executor/step_vote.h"

namespace lockstep::exec {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;

TEST(StepVoteTest, AnyEmptyBatchVetoes) {
  StepVote a, b;
  a.nonempty_batch = 1;
  b.empty_batch = 1;
  b.errors = 2;
  const StepVote both = ReduceVotes({a, b});
  EXPECT_FALSE(both.can_queue());
  EXPECT_TRUE(both.vetoed());
  EXPECT_EQ(both.errors, 2);
  const StepVote idle = ReduceVotes({b, b});
  EXPECT_FALSE(idle.can_queue());
  EXPECT_FALSE(idle.vetoed());  // nobody had a batch: an idle step, not a veto
  EXPECT_TRUE(ReduceVotes({a, a}).can_queue());
  EXPECT_EQ(StepVote::Decode(a.Encode()).nonempty_batch, 1);
}

TEST(StepVoteTest, RowsAndContextReduceToTheLargestForward) {
  StepVote decode, prefill, dummy;
  decode.rows = 12;  // e.g. 3 generation steps verifying K = 3 drafts each
  prefill.rows = 64;
  prefill.context = 1;
  dummy.rows = 4;  // the pad dummy: 1 + K
  const StepVote all = ReduceVotes({decode, dummy, prefill});
  EXPECT_EQ(all.rows, 64);
  EXPECT_EQ(all.context, 1);
  const StepVote decoding = ReduceVotes({dummy, decode});
  EXPECT_EQ(decoding.rows, 12);
  EXPECT_EQ(decoding.context, 0);
  const StepVote round_trip = StepVote::Decode(prefill.Encode());
  EXPECT_EQ(round_trip.rows, 64);
  EXPECT_EQ(round_trip.context, 1);
}

TEST(IntakeCodecTest, RoundTrip) {
  IntakeBatch b;
  b.drain = true;
  b.cancels = {RequestId(4)};
  NewRequestSpec s;
  s.id = RequestId(7);
  s.type = sched::RequestType::kGenerationOnly;
  s.prompt = {1, 2, 3};
  s.sampling.max_tokens = 9;
  s.sampling.temperature = 0.5f;
  s.sampling.stop_token_ids = {5};
  s.pinned_rank = 2;
  s.preferred_rank = 1;
  s.arrival = absl::FromUnixSeconds(100);
  sched::ContextSource c;
  c.instance = "ctx0";
  c.rank = 1;
  c.address = "127.0.0.1:9";
  c.remote_id = RequestId(7);
  c.first_token = 11;
  c.first_drafts = {12, 13, 14};
  s.context_source = c;
  b.requests.push_back(s);
  absl::StatusOr<IntakeBatch> got = IntakeBatch::Decode(b.Encode());
  ASSERT_THAT(got, IsOk());
  EXPECT_TRUE(got->drain);
  EXPECT_FALSE(got->drain_expired);
  EXPECT_THAT(got->cancels, ElementsAre(RequestId(4)));
  ASSERT_EQ(got->requests.size(), 1u);
  const NewRequestSpec& r = got->requests[0];
  EXPECT_EQ(r.id, RequestId(7));
  EXPECT_EQ(r.type, sched::RequestType::kGenerationOnly);
  EXPECT_THAT(r.prompt, ElementsAre(1, 2, 3));
  EXPECT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.pinned_rank, 2);
  EXPECT_EQ(r.preferred_rank, 1);
  EXPECT_EQ(r.arrival, absl::FromUnixSeconds(100));
  ASSERT_TRUE(r.context_source.has_value());
  EXPECT_THAT(r.context_source->first_drafts, ElementsAre(12, 13, 14));
}

TEST(IntakeCodecTest, DrainExpiredRoundTrips) {
  IntakeBatch b;
  b.drain_expired = true;
  EXPECT_FALSE(b.empty());
  absl::StatusOr<IntakeBatch> got = IntakeBatch::Decode(b.Encode());
  ASSERT_THAT(got, IsOk());
  EXPECT_FALSE(got->drain);
  EXPECT_TRUE(got->drain_expired);
}

TEST(IntakeCodecTest, TruncatedInputIsDataLoss) {
  IntakeBatch b;
  NewRequestSpec s;
  s.id = RequestId(1);
  s.prompt = {1, 2};
  b.requests.push_back(s);
  const std::string bytes = b.Encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(IntakeBatch::Decode(bytes.substr(0, n)), StatusIs(absl::StatusCode::kDataLoss))
        << n;
  }
}

TEST(ResponseCodecTest, RoundTripAndTruncation) {
  Response r;
  r.id = RequestId(3);
  r.rank = 2;
  r.step = 77;
  r.tokens = {5, 6};
  r.logprobs = {{{5, -0.5f}, {9, -1.5f}}, {{6, -0.25f}}};
  r.finished = true;
  r.finish_reason = sched::FinishReason::kError;
  r.status = absl::UnavailableError("gone");
  r.kv_pull_failed = true;
  r.num_prompt_tokens = 40;
  r.cached_prompt_tokens = 32;
  const std::string bytes = EncodeResponses({r, r});
  absl::StatusOr<std::vector<Response>> got = DecodeResponses(bytes);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].step, 77);
  EXPECT_THAT((*got)[1].tokens, ElementsAre(5, 6));
  EXPECT_EQ((*got)[1].logprobs[0][1].token, 9);
  EXPECT_EQ((*got)[1].status, absl::UnavailableError("gone"));
  EXPECT_TRUE((*got)[1].kv_pull_failed);
  EXPECT_EQ((*got)[1].num_prompt_tokens, 40);
  EXPECT_EQ((*got)[1].cached_prompt_tokens, 32);
  EXPECT_THAT(DecodeResponses(bytes.substr(0, bytes.size() - 1)),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(ResponseCodecTest, GatherPartCarriesTheKvEvents) {
  Response r;
  r.id = RequestId(4);
  r.tokens = {1};
  const kv::KvEventDelta events{.committed = {11, 12}, .evicted = {99}};
  const std::string bytes = EncodeGatherPart({r}, events);
  std::vector<Response> responses;
  kv::KvEventDelta got;
  ASSERT_THAT(DecodeGatherPart(bytes, &responses, &got), IsOk());
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].id, RequestId(4));
  EXPECT_THAT(got.committed, ElementsAre(11, 12));
  EXPECT_THAT(got.evicted, ElementsAre(99));
  EXPECT_THAT(DecodeGatherPart(bytes.substr(0, bytes.size() - 1), &responses, &got),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeGatherPart(bytes + "x", &responses, &got),
              StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace lockstep::exec

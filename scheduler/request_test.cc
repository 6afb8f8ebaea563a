#include "scheduler/request.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::sched {
namespace {

using ::testing::ElementsAre;

SamplingParams Params(int max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

TEST(RequestTest, InitialStateDependsOnType) {
  const absl::Time t = absl::UnixEpoch();
  EXPECT_EQ(Request(RequestId(1), RequestType::kAggregated, {1, 2}, Params(4), t).state(),
            RequestState::kContextInit);
  EXPECT_EQ(Request(RequestId(1), RequestType::kContextOnly, {1, 2}, Params(4), t).state(),
            RequestState::kContextInit);
  EXPECT_EQ(Request(RequestId(1), RequestType::kGenerationOnly, {1, 2}, Params(4), t).state(),
            RequestState::kGenInit);
}

TEST(RequestTest, AppendStopsAtMaxTokens) {
  Request r(RequestId(1), RequestType::kAggregated, {1}, Params(3), absl::UnixEpoch());
  AppendResult a = r.AppendTokens({5, 6}, -1);
  EXPECT_EQ(a.num_appended, 2);
  EXPECT_FALSE(a.finished);
  a = r.AppendTokens({7, 8, 9}, -1);  // a speculative step may overshoot: truncated
  EXPECT_EQ(a.num_appended, 1);
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(r.finish_reason(), FinishReason::kLength);
  EXPECT_THAT(r.output_tokens(), ElementsAre(5, 6, 7));
}

TEST(RequestTest, AppendStopsAtStopTokenAndEos) {
  SamplingParams p = Params(10);
  p.stop_token_ids = {42};
  Request r(RequestId(1), RequestType::kAggregated, {1}, p, absl::UnixEpoch());
  AppendResult a = r.AppendTokens({3, 42, 4}, 257);
  EXPECT_EQ(a.num_appended, 2);
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(r.finish_reason(), FinishReason::kStop);

  Request eos(RequestId(2), RequestType::kAggregated, {1}, Params(10), absl::UnixEpoch());
  EXPECT_TRUE(eos.AppendTokens({3, 257}, 257).finished);
  SamplingParams ignore = Params(10);
  ignore.ignore_eos = true;
  Request ign(RequestId(3), RequestType::kAggregated, {1}, ignore, absl::UnixEpoch());
  EXPECT_FALSE(ign.AppendTokens({3, 257}, 257).finished);
}

TEST(RequestTest, RecomputeContextIncludesGeneratedTokens) {
  Request r(RequestId(1), RequestType::kAggregated, {1, 2, 3}, Params(10), absl::UnixEpoch());
  r.set_context_position(3);
  r.TransitionTo(RequestState::kGenerationInProgress);
  r.AppendTokens({9, 8}, -1);
  r.set_start_order(4);
  r.ResetForRecompute();
  EXPECT_EQ(r.state(), RequestState::kContextInit);
  EXPECT_THAT(r.context_tokens(), ElementsAre(1, 2, 3, 9, 8));
  EXPECT_EQ(r.context_position(), 0);
  EXPECT_EQ(r.start_order(), -1);
  EXPECT_EQ(r.num_pauses(), 1);
  EXPECT_THAT(r.output_tokens(), ElementsAre(9, 8));  // already produced, kept
}

TEST(RequestTest, PromptReuseIsTheFirstLaunchedChunksAndSurvivesAPause) {
  Request r(RequestId(1), RequestType::kAggregated, {1, 2, 3, 4}, Params(4), absl::UnixEpoch());
  r.ResetForRecompute();  // paused before any chunk launched: nothing recorded yet
  r.RecordPromptReuse(3);
  r.ResetForRecompute();
  r.RecordPromptReuse(4);  // the recompute's own reuse is not the prompt's
  EXPECT_EQ(r.cached_prompt_tokens(), 3);
}

TEST(RequestTest, FinishSetsTerminalState) {
  Request r(RequestId(1), RequestType::kGenerationOnly, {1}, Params(2), absl::UnixEpoch());
  r.TransitionTo(RequestState::kGenTransferInProgress);
  r.Finish(FinishReason::kError, absl::UnavailableError("peer gone"), absl::UnixEpoch(), true);
  EXPECT_EQ(r.state(), RequestState::kTransferError);
  EXPECT_TRUE(r.finished());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

// A context-only request whose last chunk landed but whose KV send could not start
// fails as a transfer error (it never reaches kCtxTransferInProgress).
TEST(RequestTest, RefusedSendEndsInTransferError) {
  Request r(RequestId(5), RequestType::kContextOnly, {1, 2}, Params(4), absl::UnixEpoch());
  r.set_context_position(2);
  r.TransitionTo(RequestState::kGenerationToComplete);
  r.Finish(FinishReason::kError, absl::UnavailableError("send refused"), absl::UnixEpoch(),
           /*transfer=*/true);
  EXPECT_EQ(r.state(), RequestState::kTransferError);
  EXPECT_TRUE(r.finished());
  EXPECT_EQ(r.finish_reason(), FinishReason::kError);
  EXPECT_EQ(r.status().message(), "send refused");
}

TEST(RequestStateTest, TransitionTable) {
  using S = RequestState;
  EXPECT_TRUE(IsLegalTransition(S::kGenInit, S::kGenTransferInProgress));
  EXPECT_TRUE(IsLegalTransition(S::kGenTransferComplete, S::kGenerationInProgress));
  EXPECT_TRUE(IsLegalTransition(S::kContextInit, S::kCtxTransferInProgress));
  EXPECT_TRUE(IsLegalTransition(S::kCtxTransferInProgress, S::kCtxTransferComplete));
  EXPECT_FALSE(IsLegalTransition(S::kGenInit, S::kGenerationInProgress));
  EXPECT_FALSE(IsLegalTransition(S::kGenerationComplete, S::kGenerationInProgress));
  EXPECT_FALSE(IsLegalTransition(S::kGenerationToComplete, S::kGenerationInProgress));
  EXPECT_TRUE(IsLegalTransition(S::kGenerationToComplete, S::kCtxTransferInProgress));
  EXPECT_TRUE(IsLegalTransition(S::kGenerationToComplete, S::kTransferError));
  EXPECT_FALSE(IsLegalTransition(S::kGenerationInProgress, S::kTransferError));
  EXPECT_TRUE(IsSchedulable(S::kGenTransferComplete));
  EXPECT_FALSE(IsSchedulable(S::kGenInit));
  EXPECT_FALSE(IsSchedulable(S::kGenerationToComplete));
  EXPECT_TRUE(IsWaitingForKv(S::kGenTransferInProgress));
}

TEST(RequestDeathTest, IllegalTransitionNamesBothStates) {
  Request r(RequestId(7), RequestType::kGenerationOnly, {1}, Params(2), absl::UnixEpoch());
  EXPECT_DEATH(r.TransitionTo(RequestState::kGenerationInProgress),
               "illegal request state transition gen_init -> generation_in_progress for "
               "request 7");
}

TEST(RequestTest, DummyIsADecodingRequest) {
  auto d = Request::MakeDummy(RequestId(-1), absl::UnixEpoch());
  EXPECT_TRUE(d->is_dummy());
  EXPECT_EQ(d->state(), RequestState::kGenerationInProgress);
}

}  // namespace
}  // namespace lockstep::sched

#include "runtime/worker/proto_convert.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::GenerateRequest Base() {
  v1::GenerateRequest r;
  r.set_request_id(42);
  r.add_prompt_token_ids(7);
  r.add_prompt_token_ids(8);
  r.mutable_sampling()->set_max_tokens(5);
  r.mutable_sampling()->set_seed(9);
  r.mutable_sampling()->add_stop_token_ids(3);
  return r;
}

TEST(ProtoConvertTest, AggregatedRequest) {
  absl::StatusOr<exec::NewRequestSpec> s = ToRequestSpec(Base(), absl::UnixEpoch());
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->id, RequestId(42));
  EXPECT_EQ(s->type, sched::RequestType::kAggregated);
  EXPECT_THAT(s->prompt, ElementsAre(7, 8));
  EXPECT_EQ(s->sampling.max_tokens, 5);
  EXPECT_EQ(s->sampling.top_p, 1.0f);  // unset on the wire means disabled
  EXPECT_THAT(s->sampling.stop_token_ids, ElementsAre(3));
}

TEST(ProtoConvertTest, GenerationOnlyNeedsItsContext) {
  v1::GenerateRequest r = Base();
  r.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
  EXPECT_THAT(ToRequestSpec(r, absl::UnixEpoch()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("context")));
  v1::ContextResult* c = r.mutable_context();
  c->mutable_handle()->set_instance("ctx0");
  c->mutable_handle()->set_rank(1);
  c->mutable_handle()->set_transfer_address("127.0.0.1:5");
  c->mutable_handle()->set_context_request_id(42);
  c->set_first_token_id(11);
  c->add_draft_token_ids(12);
  absl::StatusOr<exec::NewRequestSpec> s = ToRequestSpec(r, absl::UnixEpoch());
  ASSERT_THAT(s, IsOk());
  ASSERT_TRUE(s->context_source.has_value());
  EXPECT_EQ(s->context_source->rank, 1);
  EXPECT_EQ(s->context_source->first_token, 11);
  EXPECT_THAT(s->context_source->first_drafts, ElementsAre(12));
}

TEST(ProtoConvertTest, BadIdsAreRefused) {
  v1::GenerateRequest r = Base();
  r.set_request_id(0);
  EXPECT_THAT(ToRequestSpec(r, absl::UnixEpoch()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_id")));
}

TEST(ProtoConvertTest, AContinuationOffsetMustLieInThePrompt) {
  v1::GenerateRequest r = Base();
  r.mutable_sampling()->set_num_generated_in_prompt(2);  // the whole prompt was generated
  absl::StatusOr<exec::NewRequestSpec> s = ToRequestSpec(r, absl::UnixEpoch());
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->sampling.num_generated_in_prompt, 2);
  for (int32_t bad : {-1, 3}) {
    r.mutable_sampling()->set_num_generated_in_prompt(bad);
    EXPECT_THAT(ToRequestSpec(r, absl::UnixEpoch()),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("sampling.num_generated_in_prompt")))
        << bad;
  }
}

TEST(ProtoConvertTest, TheRankHintBecomesThePreferredRank) {
  v1::GenerateRequest r = Base();
  absl::StatusOr<exec::NewRequestSpec> none = ToRequestSpec(r, absl::UnixEpoch());
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->preferred_rank.has_value());
  r.set_rank_hint(0);  // rank 0 is a hint, not "unset"
  absl::StatusOr<exec::NewRequestSpec> hinted = ToRequestSpec(r, absl::UnixEpoch());
  ASSERT_THAT(hinted, IsOk());
  EXPECT_EQ(hinted->preferred_rank, 0);
}

TEST(ProtoConvertTest, ContextHandOffCarriesTheFirstTokenOnlyInTheContextResult) {
  exec::Response r;
  r.id = RequestId(42);
  r.tokens = {11};
  r.num_prompt_tokens = 2;
  r.cached_prompt_tokens = 1;
  sched::ContextSource c;
  c.instance = "ctx0";
  c.rank = 1;
  c.address = "127.0.0.1:5";
  c.remote_id = RequestId(42);
  c.first_token = 11;
  c.first_drafts = {12, 13};
  r.context = c;
  const v1::GenerateResponse out = ToProto(r);
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_HANDOFF);
  EXPECT_EQ(out.token_ids_size(), 0);
  EXPECT_EQ(out.context().first_token_id(), 11);
  EXPECT_THAT(out.context().draft_token_ids(), ElementsAre(12, 13));
  EXPECT_EQ(out.context().handle().num_prompt_tokens(), 2);
  EXPECT_EQ(out.cached_prompt_tokens(), 1);
}

TEST(ProtoConvertTest, TokensCarryThePromptTokensReused) {
  exec::Response r;
  r.id = RequestId(7);
  r.tokens = {3};
  r.cached_prompt_tokens = 48;
  EXPECT_EQ(ToProto(r).cached_prompt_tokens(), 48);
}

TEST(ProtoConvertTest, ErrorsCarryTheirCode) {
  exec::Response r;
  r.id = RequestId(1);
  r.finished = true;
  r.finish_reason = sched::FinishReason::kError;
  r.status = absl::UnavailableError("peer gone");
  const v1::GenerateResponse out = ToProto(r);
  EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(out.error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(out.error_message(), "peer gone");
  EXPECT_FALSE(out.kv_pull_failed());
  r.kv_pull_failed = true;
  EXPECT_TRUE(ToProto(r).kv_pull_failed());
}

}  // namespace
}  // namespace lockstep::worker

#include "runtime/worker/proto_convert.h"

#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"
#include "runtime/config/sampling_wire.h"
#include "runtime/executor/testing/every_field.h"
#include "runtime/executor/testing/filled.h"
#include "runtime/worker/draft_stats.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::lockstep::exec::testing::DifferingFields;
using ::lockstep::exec::testing::FieldIndex;
using ::lockstep::exec::testing::FilledRequestSpec;
using ::lockstep::exec::testing::FilledResponse;
using ::lockstep::exec::testing::FilledSamplingParams;
using ::lockstep::exec::testing::kNumFields;
using ::lockstep::exec::testing::UnsetFields;
using ::lockstep::exec::testing::WithFieldReset;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The paths ("context.handle.rank") of the fields of `m` that hold their default, from
// its descriptor (so a field added to the .proto is seen): a repeated field or map
// must be non-empty, a scalar non-default, a message set (and is descended into).
// Paths in `exempt` (and below them) are skipped.
void AppendUnsetProto(const Message& m, const std::string& prefix,
                      const std::vector<std::string>& exempt, std::vector<std::string>& out) {
  for (int i = 0; i < m.GetDescriptor()->field_count(); ++i) {
    const FieldDescriptor* f = m.GetDescriptor()->field(i);
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (absl::c_linear_search(exempt, path)) continue;
    if (f->is_repeated() ? m.GetReflection()->FieldSize(m, f) == 0
                         : !m.GetReflection()->HasField(m, f)) {
      out.push_back(path);
    } else if (!f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      AppendUnsetProto(m.GetReflection()->GetMessage(m, f), path, exempt, out);
    }
  }
}

std::vector<std::string> UnsetProtoFields(const Message& m,
                                          const std::vector<std::string>& exempt = {}) {
  std::vector<std::string> out;
  AppendUnsetProto(m, "", exempt, out);
  return out;
}

// The set leaf fields of `m` (scalars, repeated fields, maps) by path.
void AppendLeaves(const Message& m, const std::string& prefix, std::vector<std::string>& out) {
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (!f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      AppendLeaves(m.GetReflection()->GetMessage(m, f), path, out);
    } else {
      out.push_back(path);
    }
  }
}

// `m` with the field at `path` cleared.
template <typename M>
M WithCleared(M m, const std::string& path) {
  Message* at = &m;
  const std::vector<std::string> names = absl::StrSplit(path, '.');
  for (size_t i = 0; i < names.size(); ++i) {
    const FieldDescriptor* f = at->GetDescriptor()->FindFieldByName(names[i]);
    if (i + 1 == names.size()) {
      at->GetReflection()->ClearField(at, f);
    } else {
      at = at->GetReflection()->MutableMessage(at, f);
    }
  }
  return m;
}

// The GenerateRequest the router sends for `spec` (runtime/router/core/request_runner.cc:
// the prompt and sampling, the leg's type, the context leg's result, the rank hint).
// A pinned rank is the executor's own (tests, the simulator) and never on the wire.
v1::GenerateRequest RouterRequestFor(const exec::NewRequestSpec& spec) {
  v1::GenerateRequest wire;
  wire.set_request_id(static_cast<uint64_t>(spec.id.value()));
  wire.mutable_prompt_token_ids()->Assign(spec.prompt.begin(), spec.prompt.end());
  config::SamplingToWire(spec.sampling, wire.mutable_sampling());
  wire.set_model("m");
  wire.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
  const sched::ContextSource& c = *spec.context_source;
  v1::ContextHandle* h = wire.mutable_context()->mutable_handle();
  h->set_instance(c.instance);
  h->set_rank(c.rank);
  h->set_transfer_address(c.address);
  h->set_context_request_id(static_cast<uint64_t>(c.remote_id.value()));
  h->set_lease_expiry_unix_nanos(absl::ToUnixNanos(c.lease_expiry));
  h->set_num_prompt_tokens(static_cast<int32_t>(spec.prompt.size()));
  h->set_opaque_state("state");
  wire.mutable_context()->set_first_token_id(c.first_token);
  wire.mutable_context()->mutable_first_logprobs()->set_token_id(c.first_token);
  wire.mutable_context()->mutable_first_logprobs()->set_logprob(-0.5f);
  wire.mutable_context()->mutable_first_logprobs()->add_top()->set_token_id(c.first_token);
  wire.mutable_context()->mutable_draft_token_ids()->Assign(c.first_drafts.begin(),
                                                            c.first_drafts.end());
  wire.set_rank_hint(*spec.preferred_rank);
  return wire;
}

// GenerateRequest fields the worker does not turn into the request spec: the model is
// checked by WorkerServiceImpl before the conversion; the router streams the first
// token's logprobs itself; the handle's prompt length and opaque state are read by
// no one yet.
const std::vector<std::string> kRequestFieldsNotConverted = {"model", "context.first_logprobs",
                                                             "context.handle.num_prompt_tokens",
                                                             "context.handle.opaque_state"};

TEST(SamplingWireTest, EveryFieldRoundTrips) {
  const sched::SamplingParams want = FilledSamplingParams();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledSamplingParams must set every field";
  v1::SamplingParams wire;
  config::SamplingToWire(want, &wire);
  EXPECT_THAT(UnsetProtoFields(wire), IsEmpty()) << "SamplingToWire leaves these unset";
  EXPECT_THAT(DifferingFields(config::SamplingFromWire(wire), want), IsEmpty());
  // Every field of the wire message reaches the struct: clearing any one changes it.
  std::vector<std::string> leaves;
  AppendLeaves(wire, "", leaves);
  // One leaf per scalar or repeated field, nested messages (the grammar) taken apart.
  ASSERT_EQ(leaves.size(), static_cast<size_t>(wire.GetDescriptor()->field_count()) + 1);
  for (const std::string& path : leaves) {
    EXPECT_THAT(DifferingFields(config::SamplingFromWire(WithCleared(wire, path)), want),
                ::testing::Not(IsEmpty()))
        << "SamplingFromWire ignores " << path;
  }
}

TEST(ProtoConvertTest, EveryRequestFieldReachesTheSpec) {
  exec::NewRequestSpec want = FilledRequestSpec();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledRequestSpec must set every field";
  const v1::GenerateRequest wire = RouterRequestFor(want);
  EXPECT_THAT(UnsetProtoFields(wire), IsEmpty()) << "RouterRequestFor leaves these unset";
  want.pinned_rank.reset();
  want.arrival = absl::FromUnixSeconds(1234);
  absl::StatusOr<exec::NewRequestSpec> got = ToRequestSpec(wire, want.arrival);
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(DifferingFields(*got, want), IsEmpty());
  // Every other wire field matters: clearing it changes the spec (or refuses it).
  std::vector<std::string> leaves;
  AppendLeaves(wire, "", leaves);
  for (const std::string& path : leaves) {
    if (absl::c_any_of(kRequestFieldsNotConverted,
                       [&](const std::string& p) { return path.rfind(p, 0) == 0; })) {
      continue;
    }
    absl::StatusOr<exec::NewRequestSpec> cleared =
        ToRequestSpec(WithCleared(wire, path), want.arrival);
    if (cleared.ok()) {
      EXPECT_THAT(DifferingFields(*cleared, want), ::testing::Not(IsEmpty()))
          << "ToRequestSpec ignores " << path;
    }
  }
}

// What the worker streams for a response (WorkerServiceImpl::Generate).
v1::GenerateResponse Streamed(const exec::Response& r) {
  v1::GenerateResponse out = ToProto(r);
  SetRequestDrafts(spec::Method::kDraftModel, r, &out);
  return out;
}

// Every field of `r` outside `exempt` reaches the GenerateResponse: resetting it to its
// default changes what is streamed.
void ExpectEveryFieldIsStreamed(const exec::Response& r, const std::vector<size_t>& exempt) {
  const std::string full = Streamed(r).SerializeAsString();
  for (size_t i = 0; i < kNumFields<exec::Response>; ++i) {
    if (absl::c_linear_search(exempt, i)) continue;
    EXPECT_TRUE(Streamed(WithFieldReset(r, i)).SerializeAsString() != full)
        << "Response field #" << i << " does not reach the GenerateResponse";
  }
}

TEST(ProtoConvertTest, EveryFieldOfAFinalResponseIsStreamed) {
  const exec::Response r = FilledResponse();
  ASSERT_THAT(UnsetFields(r), IsEmpty()) << "FilledResponse must set every field";
  // A final response carries no hand-off: its context and prompt length stay home.
  ExpectEveryFieldIsStreamed(r, {FieldIndex(r, &r.context), FieldIndex(r, &r.num_prompt_tokens)});
  const v1::GenerateResponse out = Streamed(r);
  EXPECT_THAT(UnsetProtoFields(out, {"context"}), IsEmpty());
  EXPECT_EQ(out.request_id(), 3u);
  EXPECT_EQ(out.rank(), 2);
  EXPECT_EQ(out.step_id(), 77);
  EXPECT_THAT(out.token_ids(), ElementsAre(5, 6));
  ASSERT_EQ(out.logprobs_size(), 2);
  EXPECT_EQ(out.logprobs(0).token_id(), 5);
  EXPECT_EQ(out.logprobs(0).logprob(), -0.5f);
  ASSERT_EQ(out.logprobs(0).top_size(), 1);
  EXPECT_EQ(out.logprobs(0).top(0).token_id(), 9);
  EXPECT_EQ(out.logprobs(0).top(0).logprob(), -1.5f);
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(out.error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(out.error_message(), "gone");
  EXPECT_TRUE(out.kv_pull_failed());
  EXPECT_EQ(out.cached_prompt_tokens(), 32);
  EXPECT_EQ(out.drafts().method(), "draft_model");
  EXPECT_EQ(out.drafts().proposed(), 12);
  EXPECT_EQ(out.drafts().accepted(), 7);
}

TEST(ProtoConvertTest, EveryFieldOfAHandOffIsStreamed) {
  exec::Response r = FilledResponse();
  r.finished = false;
  r.finish_reason = sched::FinishReason::kNone;
  r.status = absl::OkStatus();
  r.kv_pull_failed = false;
  // A hand-off's first token travels in the context result, its logprobs as the
  // context's first_logprobs; it has no error.
  ExpectEveryFieldIsStreamed(
      r, {FieldIndex(r, &r.tokens), FieldIndex(r, &r.finished), FieldIndex(r, &r.finish_reason),
          FieldIndex(r, &r.status), FieldIndex(r, &r.kv_pull_failed)});
  const v1::GenerateResponse out = Streamed(r);
  EXPECT_THAT(UnsetProtoFields(out, {"token_ids", "logprobs", "error_code", "error_message",
                                     "kv_pull_failed", "context.handle.opaque_state"}),
              IsEmpty());
  const v1::ContextHandle& h = out.context().handle();
  EXPECT_EQ(h.instance(), "ctx0");
  EXPECT_EQ(h.rank(), 3);
  EXPECT_EQ(h.transfer_address(), "127.0.0.1:9");
  EXPECT_EQ(h.context_request_id(), 77u);
  EXPECT_EQ(h.lease_expiry_unix_nanos(), absl::ToUnixNanos(r.context->lease_expiry));
  EXPECT_EQ(h.num_prompt_tokens(), 40);
  EXPECT_EQ(out.context().first_token_id(), 11);
  EXPECT_EQ(out.context().first_logprobs().token_id(), 5);
  EXPECT_THAT(out.context().draft_token_ids(), ElementsAre(12, 13, 14));
}

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
    EXPECT_THAT(
        ToRequestSpec(r, absl::UnixEpoch()),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sampling.num_generated_in_prompt")))
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

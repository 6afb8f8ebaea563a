#include "runtime/config/message_limits.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "proto/worker.pb.h"

namespace lockstep::config {
namespace {

constexpr int32_t kMaxId = std::numeric_limits<int32_t>::max();

// The largest GenerateRequest with `prompt_tokens` ids and the sampling bounds: every
// id the largest, every field set, the context leg's result included.
v1::GenerateRequest Largest(int64_t prompt_tokens) {
  v1::GenerateRequest request;
  request.set_request_id(std::numeric_limits<uint64_t>::max());
  for (int64_t i = 0; i < prompt_tokens; ++i) request.add_prompt_token_ids(kMaxId);
  v1::SamplingParams& s = *request.mutable_sampling();
  s.set_max_tokens(kMaxId);
  s.set_temperature(2);
  s.set_top_k(kMaxId);
  s.set_top_p(0.5f);
  s.set_seed(std::numeric_limits<uint64_t>::max());
  for (int64_t i = 0; i < kMaxStopTokenIds; ++i) s.add_stop_token_ids(kMaxId);
  s.set_ignore_eos(true);
  s.set_logprobs(20);
  s.set_presence_penalty(-2);
  s.set_frequency_penalty(-2);
  s.set_repetition_penalty(2);
  s.set_min_tokens(kMaxId);
  for (int64_t i = 0; i < kMaxLogitBias; ++i) {
    (*s.mutable_logit_bias())[static_cast<int32_t>(kMaxId - i)] = -100;
  }
  s.set_num_generated_in_prompt(kMaxId);
  request.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
  v1::ContextResult& context = *request.mutable_context();
  v1::ContextHandle& handle = *context.mutable_handle();
  handle.set_instance(std::string(256, 'i'));
  handle.set_rank(kMaxId);
  handle.set_transfer_address(std::string(256, 'a'));
  handle.set_context_request_id(std::numeric_limits<uint64_t>::max());
  handle.set_lease_expiry_unix_nanos(std::numeric_limits<int64_t>::min());
  handle.set_num_prompt_tokens(kMaxId);
  handle.set_opaque_state(std::string(1024, 'o'));
  context.set_first_token_id(kMaxId);
  v1::TokenLogprobs& first = *context.mutable_first_logprobs();
  first.set_token_id(kMaxId);
  first.set_logprob(-1);
  for (int i = 0; i < 20; ++i) {
    v1::TopLogprob& top = *first.add_top();
    top.set_token_id(kMaxId);
    top.set_logprob(-1);
  }
  for (int i = 0; i < 64; ++i) context.add_draft_token_ids(kMaxId);
  request.set_model(std::string(1024, 'm'));
  request.set_rank_hint(kMaxId);
  return request;
}

TEST(MessageLimitsTest, TheLargestRequestFits) {
  for (const int64_t prompt_tokens : {int64_t{0}, int64_t{1}, int64_t{2048}, int64_t{1} << 20}) {
    SCOPED_TRACE(prompt_tokens);
    const int64_t size = static_cast<int64_t>(Largest(prompt_tokens).ByteSizeLong());
    EXPECT_LE(size, MaxGenerateRequestBytes(prompt_tokens));
    EXPECT_LE(size, GrpcMessageLimit(MaxGenerateRequestBytes(prompt_tokens)));
  }
}

TEST(MessageLimitsTest, LimitsStayWithinGrpcsRange) {
  EXPECT_EQ(GrpcMessageLimit(0), kGrpcDefaultMessageBytes);
  EXPECT_EQ(GrpcMessageLimit(MaxGenerateRequestBytes(2048)), kGrpcDefaultMessageBytes);
  EXPECT_GT(GrpcMessageLimit(MaxGenerateRequestBytes(1 << 20)), kGrpcDefaultMessageBytes);
  EXPECT_EQ(GrpcMessageLimit(MaxGenerateRequestBytes(int64_t{1} << 40)),
            std::numeric_limits<int32_t>::max());
}

}  // namespace
}  // namespace lockstep::config

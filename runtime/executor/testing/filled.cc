#include "runtime/executor/testing/filled.h"

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep::exec::testing {

sched::SamplingParams FilledSamplingParams() {
  sched::SamplingParams s;
  s.max_tokens = 9;
  s.temperature = 0.5f;
  s.top_k = 7;
  s.top_p = 0.875f;
  s.seed = 0x123456789abcdefULL;
  s.stop_token_ids = {5, 6};
  s.ignore_eos = true;
  s.logprobs = 3;
  s.presence_penalty = 0.25f;
  s.frequency_penalty = -0.5f;
  s.repetition_penalty = 1.25f;
  s.min_tokens = 2;
  s.logit_bias = {{3, 1.5f}, {8, -2.0f}};  // sorted by token, as the proto path returns it
  s.num_generated_in_prompt = 1;
  s.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, "[a-z]+"};
  return s;
}

sched::ContextSource FilledContextSource() {
  sched::ContextSource c;
  c.instance = "ctx0";
  c.rank = 3;
  c.address = "127.0.0.1:9";
  c.remote_id = RequestId(77);
  c.lease_expiry = absl::FromUnixNanos(1'700'000'000'123'456'789);
  c.first_token = 11;
  c.first_drafts = {12, 13, 14};
  return c;
}

NewRequestSpec FilledRequestSpec() {
  NewRequestSpec s;
  s.id = RequestId(42);
  s.type = sched::RequestType::kGenerationOnly;
  s.prompt = {1, 2, 3};
  s.sampling = FilledSamplingParams();
  s.context_source = FilledContextSource();
  s.pinned_rank = 2;
  s.preferred_rank = 1;
  s.arrival = absl::FromUnixNanos(1'600'000'000'987'654'321);
  return s;
}

IntakeBatch FilledIntakeBatch() {
  IntakeBatch b;
  b.requests = {FilledRequestSpec()};
  b.cancels = {RequestId(4), RequestId(5)};
  b.drain = true;
  b.drain_expired = true;
  return b;
}

Response FilledResponse() {
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
  r.context = FilledContextSource();
  r.num_prompt_tokens = 40;
  r.cached_prompt_tokens = 32;
  r.drafts_proposed = 12;
  r.drafts_accepted = 7;
  return r;
}

}  // namespace lockstep::exec::testing

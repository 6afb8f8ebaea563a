// What an instance sends back for a request: new tokens, the finish, or an error. The
// ranks' responses are gathered to the leader once per step (every rank joins the
// gather, with an empty list if it has nothing), each rank's part followed by the KV
// events of its target radix tree since the previous step, and delivered to a
// ResponseSink there.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_RESPONSE_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/kv_events.h"
#include "runtime/engine/model_engine.h"
#include "scheduler/request.h"
#include "scheduler/request_state.h"

namespace lockstep::exec {

struct Response {
  RequestId id;
  int32_t rank = 0;  // the rank that owns the request
  int64_t step = 0;
  std::vector<int32_t> tokens;  // new tokens since the previous response
  // Per token in `tokens` when logprobs were requested: chosen token's logprob first,
  // then the top-n alternatives.
  std::vector<std::vector<engine::TokenLogprob>> logprobs;
  bool finished = false;
  sched::FinishReason finish_reason = sched::FinishReason::kNone;
  absl::Status status;  // set with kError (and kCancelled)
  // kError of a generation-only request whose KV pull failed or missed its deadline
  // (the context instance may be at fault; the router then retries with a fresh
  // context leg).
  bool kv_pull_failed = false;
  // Context-only requests: where the KV waits, what the context leg produced (first
  // token and drafts are in `context->first_token` / `first_drafts`).
  std::optional<sched::ContextSource> context;
  int64_t num_prompt_tokens = 0;
  // Prompt tokens whose KV this rank reused from its prefix cache instead of computing
  // them (set from the request's first token on; 0 for a generation-only request).
  int64_t cached_prompt_tokens = 0;
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
};

// Serialization of one rank's responses for the gather.
std::string EncodeResponses(absl::Span<const Response> responses);
absl::StatusOr<std::vector<Response>> DecodeResponses(const std::string& bytes);

// One rank's part of the step's response gather: its responses, then the KV event
// delta of its target radix tree since the previous step (empty without KV events).
std::string EncodeGatherPart(absl::Span<const Response> responses, const kv::KvEventDelta& events);
absl::Status DecodeGatherPart(const std::string& bytes, std::vector<Response>* responses,
                              kv::KvEventDelta* events);

// Receives the gathered responses on the leader, on the executor thread. Must not
// block: hand them to client streams and return.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void OnResponses(std::vector<Response> responses) = 0;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_RESPONSE_H_

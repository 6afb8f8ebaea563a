// A client request as the router runs it, whichever API it came from (OpenAI HTTP or
// gRPC), and what the router streams back.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_REQUEST_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_REQUEST_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/worker.pb.h"
#include "scheduler/sampling_params.h"

namespace lockstep::router {

struct RouterRequest {
  std::string model;
  std::vector<int32_t> prompt;  // token ids
  sched::SamplingParams sampling;
  // Stop strings (the OpenAI `stop`): the router ends the request at the first one in
  // the generated text (GeneratedText), which is not returned.
  std::vector<std::string> stop;
};

// New tokens of one request.
struct TokenDelta {
  std::vector<int32_t> token_ids;
  std::vector<v1::TokenLogprobs> logprobs;  // one per token when asked for
};

// What the runner does after a TokenSink took new tokens.
enum class SinkAction {
  kContinue,
  // The output is complete (it reached a stop string): the request ends as finished
  // with FINISH_REASON_STOP and is cancelled on the worker.
  kStop,
  // The client is gone: the request is cancelled.
  kClientGone,
};

// Receives a request's output while it runs.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // Called on the thread running the request (RequestRunner::Run's caller).
  virtual SinkAction OnTokens(const TokenDelta& delta) = 0;
  // The asynchronous runner's call (RequestRunner::Start), on a gRPC callback thread: takes
  // `delta` as OnTokens does and calls `done` once with the action when the sink can take
  // more, at once or later on any thread (a stream whose client is behind: when it caught
  // up, or went away). It never blocks. The default calls OnTokens, then `done`.
  virtual void OnTokensAsync(const TokenDelta& delta, std::function<void(SinkAction)> done) {
    done(OnTokens(delta));
  }
  // Polled from the router's sweeper thread while the request runs; false once the
  // client has gone. Must be thread-safe.
  virtual bool ClientConnected() = 0;
};

struct RequestResult {
  uint64_t request_id = 0;
  // OK when the request finished normally (length or stop); otherwise why it ended.
  absl::Status status;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  int64_t prompt_tokens = 0;
  // Of prompt_tokens, those whose KV the prefilling instance reused from its prefix
  // cache (the last attempt's prefill, at most prompt_tokens).
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // "agg0", or "ctx0->gen0" for the two-leg flow; a migrated request's attempts joined
  // by " => " ("agg0 => agg1").
  std::string route;
  // Speculative decoding: the drafts proposed and accepted for this request, summed
  // over its legs (zero when none were proposed).
  v1::DraftTokens drafts;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_REQUEST_H_

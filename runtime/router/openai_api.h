// The OpenAI-compatible wire format of /v1/completions and /v1/chat/completions:
// request parsing and validation of JSON types, and the response bodies (whole, or as
// server-sent events).
//
// Accepted request fields: model, prompt (string, [string], or [token ids]) or
// messages (chat), max_tokens (chat also max_completion_tokens), temperature (default
// 1), top_p, seed, n (1 only), stream, stream_options.include_usage, logprobs
// (completions: top-n count; chat: bool with top_logprobs), echo (false only), stop
// (null or empty only), presence_penalty / frequency_penalty (0 only), best_of (1
// only), user (ignored); extensions: top_k, ignore_eos, stop_token_ids. Other fields
// are ignored. A field of the wrong JSON type is INVALID_ARGUMENT naming it.
//
// Streaming: each event is `data: {json}\n\n`, the stream ends with `data: [DONE]\n\n`;
// text is decoded with a Utf8StreamDecoder so no event splits a character. An error
// after the stream began is sent as `data: {"error": {...}}` before [DONE].
#ifndef LOCKSTEP_RUNTIME_ROUTER_OPENAI_API_H_
#define LOCKSTEP_RUNTIME_ROUTER_OPENAI_API_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/router/router_request.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::router {

enum class ApiKind { kCompletion, kChat };

struct OpenAiRequest {
  ApiKind kind = ApiKind::kCompletion;
  RouterRequest request;
  bool has_seed = false;
  bool stream = false;
  bool include_usage = false;
  bool want_logprobs = false;
  int32_t top_logprobs = 0;  // alternatives per token in the response
};

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(ApiKind kind, std::string_view body,
                                                 const tok::ByteTokenizer& tokenizer);

// The HTTP status for an error status, and the OpenAI error body
// {"error": {"message", "type", "param", "code"}}.
int HttpStatusOf(const absl::Status& status);
std::string ErrorBody(const absl::Status& status);
std::string ErrorEvent(const absl::Status& status);  // "data: {error}\n\ndata: [DONE]\n\n"

// "length", "stop", "cancelled", or null-like "" when not finished.
std::string_view FinishReasonName(v1::FinishReason reason);

// The response of one request. Thread-compatible; used by the request's thread.
class OpenAiResponseWriter {
 public:
  OpenAiResponseWriter(const OpenAiRequest& request, std::string id, int64_t created,
                       const tok::ByteTokenizer& tokenizer);

  // Streaming: the event for new tokens ("" when there is nothing to send yet).
  std::string StreamEvent(const TokenDelta& delta);
  // Streaming: the last events (finish reason, usage when asked, [DONE]).
  std::string StreamEnd(const RequestResult& result);

  // Non-streaming: collect tokens, then the whole body.
  void Append(const TokenDelta& delta);
  std::string Body(const RequestResult& result);

 private:
  nlohmann::json Envelope(bool chunk) const;
  nlohmann::json Choice(const std::string& text, const nlohmann::json& logprobs,
                        const nlohmann::json& finish_reason, bool chunk);
  // The logprobs object for `delta` (null when not asked); `text_offset` advances.
  nlohmann::json Logprobs(const TokenDelta& delta);
  void MergeLogprobs(nlohmann::json& into, const nlohmann::json& more) const;
  nlohmann::json Usage(const RequestResult& result) const;
  std::string TokenText(int32_t id) const;

  const ApiKind kind_;
  const std::string id_;
  const std::string model_;
  const int64_t created_;
  const bool want_logprobs_;
  const int32_t top_logprobs_;
  const bool include_usage_;
  const tok::ByteTokenizer& tokenizer_;
  tok::Utf8StreamDecoder decoder_;
  bool sent_role_ = false;
  int64_t text_offset_ = 0;
  std::string text_;         // non-streaming
  nlohmann::json logprobs_;  // non-streaming
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_OPENAI_API_H_

// The OpenAI-compatible wire format of /v1/completions and /v1/chat/completions:
// request parsing and validation of JSON types, and the response bodies (whole, or as
// server-sent events).
//
// Request fields: which are accepted, ignored or refused is request_fields.h's policy
// (an unknown field, or a known one that would change the output and is not
// implemented, is INVALID_ARGUMENT naming it). Implemented: model, prompt (string,
// [string], or [token ids]; add_special_tokens, default true, adds the tokenizer's
// special tokens to a text prompt) or messages (chat; chat_prompt.h:
// add_generation_prompt, add_special_tokens, chat_template_kwargs, and tools with
// tool_choice "auto" or "none", parallel_tool_calls and include_reasoning:
// openai_tools.h; rendered by the model's template), max_tokens (chat also
// max_completion_tokens), temperature, top_p (each omitted one, like the top_k and
// repetition_penalty extensions, takes the model's default, text/sampling_defaults.h, else
// temperature 1 and the others off), seed, n (1..128: n choices, choice i sampled with
// ChoiceSeed(seed, i)), stream, stream_options.include_usage, logprobs (completions:
// top-n count; chat: bool with top_logprobs), echo (completions: the prompt text
// starts each choice's text; not with logprobs), stop (a string or up to 4 strings:
// generation ends at the first, which is not returned; finish_reason "stop"), best_of
// (1 or n), presence_penalty, frequency_penalty, logit_bias ({"token id": bias}), user
// (a string, ignored); extensions: top_k, ignore_eos, stop_token_ids,
// repetition_penalty, min_tokens. A field of the wrong JSON type is INVALID_ARGUMENT
// naming it; so is an integer outside its range (int32 for token ids and counts, int64
// for seed: refused, never truncated), and stop_token_ids or logit_bias with more than
// kMaxStopTokenIds / kMaxLogitBias entries (1024 each). A chat template error while
// rendering is INVALID_ARGUMENT naming "messages". The body is parsed within JSON
// bounds (request_fields.h: ParseRequestBody) before anything else reads it.
//
// Chat output: with a model whose template thinks in <think>...</think> (Qwen 3,
// DeepSeek-R1) the reasoning is returned apart, as the message's reasoning_content
// (dropped with include_reasoning false); with tools and tool_choice "auto" the calls
// written in the model family's format become the message's tool_calls ({id, type
// "function", function {name, arguments: a JSON string}}; content null when there is
// none) and a finish reason "stop" becomes "tool_calls". Streamed, a call's first delta
// carries its index, id, type and name, the next ones fragments of its arguments.
//
// Usage with n > 1: prompt_tokens once, completion_tokens summed over the choices.
//
// Streaming: each event is `data: {json}\n\n`, the stream ends with `data: [DONE]\n\n`;
// text is decoded incrementally (GeneratedText) so no event splits a character, and
// only text that could still begin a stop string is held back. With n > 1 the events
// of the choices interleave, each naming its index. An error after the stream began is
// sent as `data: {"error": {...}}` before [DONE].
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_API_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/core/router_request.h"
#include "runtime/router/http/request_fields.h"
#include "runtime/router/text/generated_text.h"
#include "runtime/router/text/sampling_defaults.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "runtime/router/tool_calls/output_delta.h"
#include "runtime/router/tool_calls/parser_family.h"

namespace lockstep::router {

inline constexpr int32_t kMaxChoices = 128;

struct OpenAiRequest {
  ApiKind kind = ApiKind::kCompletion;
  RouterRequest request;
  bool has_seed = false;
  bool stream = false;
  bool include_usage = false;
  bool want_logprobs = false;
  int32_t top_logprobs = 0;  // alternatives per token in the response
  int32_t n = 1;             // choices
  bool echo = false;         // completions: each choice's text starts with the prompt
  // Chat: how the output text is split into content, reasoning_content and tool_calls
  // (openai_tools.h, tool_calls/parser_family.h): the model's family (from its chat
  // template), whether calls are parsed, and the rendered prompt (an open <think> at
  // its end means the output starts as reasoning).
  tool_calls::ParserFamily output_family;
  bool parse_tool_calls = false;
  bool parallel_tool_calls = true;
  bool include_reasoning = true;
  std::string prompt_text;
};

// `bounds`: the body's JSON bounds (RequestJsonBounds of the router's limits).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(ApiKind kind, std::string_view body,
                                                 const ServingTokenizer& tokenizer,
                                                 const SamplingDefaults& defaults = {},
                                                 const JsonBounds& bounds = {});

// The seed of choice `index` of a request with `seed`: choice 0 keeps the request's
// seed (so n = 1 samples as before), the others derive theirs from it.
uint64_t ChoiceSeed(uint64_t seed, int32_t index);

// The HTTP status for an error status, and the OpenAI error body
// {"error": {"message", "type", "param", "code"}}.
int HttpStatusOf(const absl::Status& status);
std::string ErrorBody(const absl::Status& status);
std::string ErrorEvent(const absl::Status& status);  // "data: {error}\n\ndata: [DONE]\n\n"

// "length", "stop", "cancelled", or null-like "" when not finished.
std::string_view FinishReasonName(v1::FinishReason reason);

// The response of one choice of a request (`index`), and the parts of the response
// that cover all choices (usage, [DONE], the whole body). Thread-compatible; each
// choice's writer is used by the thread running that choice.
class OpenAiResponseWriter {
 public:
  OpenAiResponseWriter(const OpenAiRequest& request, std::string id, int64_t created,
                       const ServingTokenizer& tokenizer, int32_t index = 0);

  // The output reached a stop string: the request should end (SinkAction::kStop).
  bool stopped() const { return text_stream_.stopped(); }

  // Streaming: the event for new tokens ("" when there is nothing to send yet).
  std::string StreamEvent(const TokenDelta& delta);
  // Streaming: this choice's last event (the rest of its text, the finish reason).
  std::string StreamFinish(const RequestResult& result);
  // Streaming, after every choice finished: the usage event when asked, then [DONE].
  std::string StreamTail(const std::vector<RequestResult>& results) const;
  // Streaming with one choice: StreamFinish, then StreamTail.
  std::string StreamEnd(const RequestResult& result);

  // Non-streaming: collect tokens, then this choice's object, or the whole body.
  void Append(const TokenDelta& delta);
  nlohmann::json FinishedChoice(const RequestResult& result);
  // The body for the choices of every writer (in index order) and their results.
  std::string Body(const std::vector<nlohmann::json>& choices,
                   const std::vector<RequestResult>& results) const;
  // One choice: FinishedChoice, then Body.
  std::string Body(const RequestResult& result);

 private:
  nlohmann::json Envelope(bool chunk) const;
  nlohmann::json Choice(const std::string& text, const nlohmann::json& logprobs,
                        const nlohmann::json& finish_reason, bool chunk);
  // Chat with an output parser: the streamed choice of `delta`, and the whole message.
  nlohmann::json ChatChunkChoice(const tool_calls::OutputDelta& delta,
                                 const nlohmann::json& logprobs,
                                 const nlohmann::json& finish_reason);
  nlohmann::json WholeMessage() const;
  // Raw text through the parser (parallel_tool_calls and include_reasoning applied).
  tool_calls::OutputDelta Parse(const std::string& text, bool final);
  std::string FinishReason(const RequestResult& result) const;
  std::string CallId(int call) const;
  // The logprobs object for `delta` (null when not asked); `text_offset` advances.
  nlohmann::json Logprobs(const TokenDelta& delta);
  void MergeLogprobs(nlohmann::json& into, const nlohmann::json& more) const;
  // The text of new tokens, with the echoed prompt before the first.
  std::string NextText(const TokenDelta& delta);
  std::string FinishText();

  const ApiKind kind_;
  const std::string id_;
  const std::string model_;
  const int64_t created_;
  const int32_t index_;
  const bool want_logprobs_;
  const int32_t top_logprobs_;
  const bool include_usage_;
  const ServingTokenizer& tokenizer_;
  GeneratedText text_stream_;
  std::string echo_;  // the prompt text still to send (echo)
  bool sent_role_ = false;
  int64_t text_offset_ = 0;
  std::string text_;         // non-streaming
  nlohmann::json logprobs_;  // non-streaming
  // Chat whose family thinks or whose request parses tool calls; else null.
  std::unique_ptr<tool_calls::OutputParser> parser_;
  const bool parallel_tool_calls_;
  const bool include_reasoning_;
  bool any_tool_call_ = false;
  tool_calls::ParsedOutput parsed_;  // non-streaming
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_API_H_

// Which fields the client APIs accept in a request body, and what happens to the
// others. Every field falls in one class:
//
//   * implemented: parsed and honoured (openai_api.cc, tokenize_api.cc);
//   * accepted and ignored: they do not change the output (user, metadata, store,
//     service_tier, prompt_cache_key, safety_identifier, parallel_tool_calls);
//   * known and not implemented, output-changing: INVALID_ARGUMENT naming the field,
//     unless it holds the value that changes nothing (tool_choice "none", suffix "",
//     include_stop_str_in_output false, response_format {"type": "text"}, ...);
//   * anything else: INVALID_ARGUMENT naming the field ("unknown field"), as OpenAI
//     answers; a misspelt or unsupported option is never silently dropped. (vLLM
//     ignores unknown fields; Lockstep does not.)
//
// A field whose value is JSON null counts as absent, whatever its name. Only top-level
// fields are checked, and stream_options' keys; messages, tools, logit_bias and
// chat_template_kwargs hold the client's own keys.
//
// Thread-safe (pure functions).
#ifndef LOCKSTEP_RUNTIME_ROUTER_REQUEST_FIELDS_H_
#define LOCKSTEP_RUNTIME_ROUTER_REQUEST_FIELDS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace lockstep::router {

enum class ApiKind { kCompletion, kChat };

// The checks above for a /v1/completions or /v1/chat/completions body (an object); one
// error, for the first offending field. Types and ranges of implemented fields are
// the parser's.
absl::Status CheckOpenAiFields(ApiKind kind, const nlohmann::json& body);

// Unknown fields of `body` (an object) for an endpoint whose fields are `known`
// (`endpoint` names it in the message).
absl::Status CheckKnownFields(const nlohmann::json& body, absl::Span<const std::string_view> known,
                              std::string_view endpoint);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_REQUEST_FIELDS_H_

// Which fields the client APIs accept in a request body, and what happens to the
// others. Every field falls in one class:
//
//   * implemented: parsed and honoured (openai_api.cc, tokenize_api.cc);
//   * accepted and ignored: they do not change the output (user, metadata, store,
//     service_tier, prompt_cache_key, safety_identifier);
//   * known and not implemented, output-changing: INVALID_ARGUMENT naming the field,
//     unless it holds the value that changes nothing (function_call "none", suffix "",
//     include_stop_str_in_output false, response_format {"type": "text"}, ...);
//   * anything else: INVALID_ARGUMENT naming the field ("unknown field"), as OpenAI
//     answers; a misspelt or unsupported option is never silently dropped. (vLLM
//     ignores unknown fields; Lockstep does not.)
//
// A field whose value is JSON null counts as absent, whatever its name. Only top-level
// fields are checked, and stream_options' keys; messages, tools, logit_bias and
// chat_template_kwargs hold the client's own keys.
//
// Every body is parsed by ParseRequestBody, which refuses JSON nested deeper than 64
// levels or holding more than 2^18 values plus max_prompt_tokens (so that a prompt of
// token ids always fits) while it parses, before anything else touches the body
// (common/bounded_json.h; docs/security.md §6).
//
// Thread-safe (pure functions).
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_FIELDS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_FIELDS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/bounded_json.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {

enum class ApiKind { kCompletion, kChat };

// The JSON bounds of a request body for a router serving `limits`.
JsonBounds RequestJsonBounds(const RequestLimits& limits);

// `body` as a JSON object (BasicJson: nlohmann::json or ordered_json); INVALID_ARGUMENT
// with no param when it is not JSON, past `bounds`, or not an object.
template <typename BasicJson>
absl::StatusOr<BasicJson> ParseRequestBody(std::string_view body, const JsonBounds& bounds);

// A short form of `value` for error messages: a scalar as JSON (a string cut at 40
// characters), an array or object by its type; never the whole of a large value.
std::string JsonPreview(const nlohmann::json& value);
std::string JsonPreview(const nlohmann::ordered_json& value);

// The checks above for a /v1/completions or /v1/chat/completions body (an object); one
// error, for the first offending field. Types and ranges of implemented fields are
// the parser's.
absl::Status CheckOpenAiFields(ApiKind kind, const nlohmann::json& body);

// Unknown fields of `body` (an object) for an endpoint whose fields are `known`
// (`endpoint` names it in the message).
absl::Status CheckKnownFields(const nlohmann::json& body, absl::Span<const std::string_view> known,
                              std::string_view endpoint);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_FIELDS_H_

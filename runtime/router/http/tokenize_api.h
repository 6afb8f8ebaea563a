// POST /v1/tokenize and /v1/detokenize (the vLLM extension), answered by the router
// with the served model's tokenizer, without any worker:
//
//   /v1/tokenize    {"model", "prompt": text, "add_special_tokens": bool (default true)}
//                   or {"model", "messages": [...]} (the chat template's prompt; with
//                   chat_prompt.h's add_generation_prompt, add_special_tokens,
//                   chat_template_kwargs and tools)
//                -> {"tokens": [ids], "count": n, "max_model_len": max prompt tokens}
//   /v1/detokenize  {"model", "tokens": [ids]} -> {"prompt": text} (as transformers'
//                   tokenizer.decode: special tokens shown, an invalid run of
//                   byte-fallback tokens one U+FFFD per byte, the model's
//                   clean_up_tokenization_spaces applied)
// (The HTTP frontend serves both at /tokenize and /detokenize too, vLLM's paths.)
//
// The body is parsed within the router's JSON bounds (request_fields.h) before any
// field is read; fields are read in place, never copied.
// Errors as for the generation endpoints: INVALID_ARGUMENT naming the field (an
// unknown field too, request_fields.h), NOT_FOUND for another model. Thread-safe (pure functions of
// their arguments).
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_TOKENIZE_API_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_TOKENIZE_API_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/text/serving_tokenizer.h"

namespace lockstep::router {

// The response body of /v1/tokenize for request `body`.
absl::StatusOr<std::string> Tokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                     const RequestLimits& limits);

// The response body of /v1/detokenize for request `body`.
absl::StatusOr<std::string> Detokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                       const RequestLimits& limits);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_TOKENIZE_API_H_

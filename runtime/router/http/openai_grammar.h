// The constrained-decoding options of an OpenAI request, as a grammar::GrammarSpec the
// rank that owns the request enforces in its sampler (SamplingParams::grammar):
//
//   response_format  {"type": "text"} (none), {"type": "json_object"} (any JSON
//                    object), {"type": "json_schema", "json_schema": {"name": N,
//                    "schema": S, "strict"?: bool, "description"?}} (the output is
//                    JSON valid under S; enforced whether or not strict is set).
//   tool_choice      "required" or {"type": "function", "function": {"name": N}}: the
//                    output is a call (one, or with parallel_tool_calls several, for
//                    "required") in the model family's tool-call format, each
//                    {"name": one of the tools (N when named), "arguments" (Llama 3:
//                    "parameters"): valid under the tool's parameters schema}.
//                    Families whose markers are special tokens (DeepSeek V3, Mistral)
//                    cannot be forced: INVALID_ARGUMENT saying so.
//
// Both take the body as parsed keeping the client's key order: a schema's properties
// are generated in the order the client wrote them. Local references ("$ref": "#/...")
// of a tool's parameters resolve within that tool's parameters. A spec that does not
// compile (remote references and reference cycles among them) is INVALID_ARGUMENT
// naming the field and the problem (HTTP 400). Thread-safe (pure functions).
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_GRAMMAR_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_GRAMMAR_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "grammar/grammar_spec.h"
#include "nlohmann/json.hpp"
#include "runtime/router/tool_calls/parser_family.h"

namespace lockstep::router {

// The grammar `body`'s response_format asks for; nullopt for text or none.
absl::StatusOr<std::optional<grammar::GrammarSpec>> ResponseFormatGrammar(
    const nlohmann::ordered_json& body);

// The grammar of a forced call among `tools` (a validated tools array): `function`
// names the one to call, empty for any (tool_choice "required").
absl::StatusOr<grammar::GrammarSpec> ForcedToolCallGrammar(const nlohmann::ordered_json& tools,
                                                           const std::string& function,
                                                           tool_calls::ToolFormat format,
                                                           bool parallel_tool_calls);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_GRAMMAR_H_

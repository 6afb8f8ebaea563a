// The tool options of a /v1/chat/completions request: `tools` (function definitions),
// `tool_choice` and `parallel_tool_calls`, validated; and `include_reasoning` (an
// extension, as in vLLM: false drops reasoning_content from the response).
//
//   tools               [{"type": "function", "function": {"name", "description"?,
//                       "parameters"? (a JSON-schema object), "strict"?}}]; the name
//                       [A-Za-z0-9_-]{1,64}, unique.
//   tool_choice         "none" (the tools are shown to the model, its output is text),
//                       "auto" (default with tools: calls in the output are parsed into
//                       tool_calls), "required" or {"type": "function", "function":
//                       {"name": N}} (force a call through a grammar,
//                       openai_grammar.h). Other than "none" only with tools.
//   parallel_tool_calls bool, default true; false keeps only the first call.
//
// Errors are INVALID_ARGUMENT naming the field and the problem. Thread-safe (pure).
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_TOOLS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_TOOLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::router {

struct ToolOptions {
  bool has_tools = false;
  bool parse_tool_calls = false;  // tools given and tool_choice is not "none"
  bool force_tool_call = false;   // tool_choice "required" or named
  std::string forced_function;    // named: the function; "required": empty
  bool parallel_tool_calls = true;
  bool include_reasoning = true;
};

// The tool options of a chat request `body` (an object).
absl::StatusOr<ToolOptions> ParseToolOptions(const nlohmann::json& body);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_OPENAI_TOOLS_H_

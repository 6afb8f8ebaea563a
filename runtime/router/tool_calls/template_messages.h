// OpenAI chat messages made ready for a family's chat template. Clients send an
// assistant turn's tool calls with `arguments` as a JSON string and `content` null;
// templates differ in what they expect:
//   * Hermes/Qwen, Llama 3.x, Mistral: arguments as an object (Llama 3.1 writes them
//     with tojson; a string would be quoted twice), content a string (Qwen 3's template
//     calls string methods on it): a parseable string becomes its object, null content
//     "" — as vLLM prepares them;
//   * DeepSeek V3: arguments as a string (concatenated into the prompt), content null on
//     a tool-call turn (its template tells such a turn by `content is none`).
// Other messages and fields are left as they are.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TEMPLATE_MESSAGES_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TEMPLATE_MESSAGES_H_

#include "nlohmann/json.hpp"
#include "runtime/router/tool_calls/parser_family.h"

namespace lockstep::router::tool_calls {

// `messages` as the template of `format` wants them (a non-array is returned as it is).
nlohmann::ordered_json MessagesForTemplate(ToolFormat format, nlohmann::ordered_json messages);

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TEMPLATE_MESSAGES_H_

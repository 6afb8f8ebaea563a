// The tool-call parsers of each model family. Each takes the model's text after the
// reasoning is taken out, and splits it into content and tool calls (deltas: a call's
// name as soon as it is complete, then its arguments as they arrive). Text that looks
// like a call but is not one (no string "name", malformed) stays content.
//
//   hermes       Hermes / Qwen 2.5 / Qwen 3:   <tool_call>{"name": f, "arguments": {..}}</tool_call>
//   llama3_json  Llama 3.x JSON calls: the output starts with {"name": f, "parameters": {..}}
//                (after <|python_tag|> if it was kept), several separated by ';'
//   deepseek_v3  DeepSeek V3 / R1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f
//                ```json\n{..}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>; also V3.1's
//                <｜tool▁call▁begin｜>f<｜tool▁sep｜>{..}<｜tool▁call▁end｜>
//   mistral      [TOOL_CALLS][{"name": f, "arguments": {..}}, ...], or (tokenizer v11+)
//                [TOOL_CALLS]f[ARGS]{..}. [TOOL_CALLS] is a special token that decoding
//                skips, so an output that starts with a JSON array of objects is taken
//                as the calls too.
//
// Not thread-safe; one per sequence.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TOOL_PARSERS_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TOOL_PARSERS_H_

#include <memory>
#include <string_view>

#include "runtime/router/tool_calls/output_delta.h"

namespace lockstep::router::tool_calls {

inline constexpr std::string_view kHermesOpen = "<tool_call>";
inline constexpr std::string_view kHermesClose = "</tool_call>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";
inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kMistralToolCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kMistralArgs = "[ARGS]";

std::unique_ptr<OutputParser> NewHermesParser();
std::unique_ptr<OutputParser> NewLlama3JsonParser();
std::unique_ptr<OutputParser> NewDeepSeekV3Parser();
std::unique_ptr<OutputParser> NewMistralParser();

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_TOOL_PARSERS_H_

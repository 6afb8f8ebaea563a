// Separates a thinking model's reasoning from its answer: DeepSeek-R1 and Qwen 3 write
// `<think>reasoning</think>answer`. The reasoning is what comes between the tags, the
// answer what follows `</think>`; whitespace around both is trimmed (the templates put
// newlines there). When the prompt already opened the block (DeepSeek-R1's template
// ends the generation prompt with "<think>\n"), the output starts as reasoning. An
// output that does not start with `<think>` (Qwen 3 with enable_thinking false) is all
// answer. Not thread-safe; one per sequence.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_REASONING_PARSER_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_REASONING_PARSER_H_

#include <string>
#include <string_view>

#include "runtime/router/tool_calls/markers.h"
#include "runtime/router/tool_calls/output_delta.h"

namespace lockstep::router::tool_calls {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// Whether a prompt ends inside an open <think> block (the output then starts as
// reasoning).
bool PromptOpensThinking(std::string_view prompt_text);

class ReasoningParser : public OutputParser {
 public:
  explicit ReasoningParser(bool starts_in_reasoning);

  // Deltas with content and reasoning only.
  OutputDelta Push(std::string_view text) override;
  OutputDelta Finish() override;

 private:
  enum class State { kStart, kReasoning, kContent };
  OutputDelta Drain(bool final);

  State state_;
  std::string buffer_;
  bool trim_front_;  // strip whitespace before the current part's first text
  SpaceHeldText reasoning_;
};

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_REASONING_PARSER_H_

// Which output parsers a model gets: the tool-call format of its family and whether it
// thinks in <think>...</think>, read from its chat template (tokenizer_config.json) or
// named by configuration.
//
//   ASSIGN_OR_RETURN(ParserFamily family, ParserFamilyFromNames("auto", "auto", template));
//   std::unique_ptr<OutputParser> parser = NewOutputParser(family, prompt_text, tools_on);
//
// Thread-safe (pure functions).
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_PARSER_FAMILY_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_PARSER_FAMILY_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/router/tool_calls/output_delta.h"

namespace lockstep::router::tool_calls {

enum class ToolFormat { kNone, kHermes, kLlama3Json, kDeepSeekV3, kMistral };

struct ParserFamily {
  ToolFormat tools = ToolFormat::kNone;
  bool reasoning = false;  // <think>...</think>
  bool operator==(const ParserFamily&) const = default;
};

// "none", "hermes" (also "qwen"), "llama3_json", "deepseek_v3", "mistral".
std::string_view ToolFormatName(ToolFormat format);
absl::StatusOr<ToolFormat> ToolFormatFromName(std::string_view name);

// What a chat template's source says: the tool-call markers it writes (<tool_call>,
// <｜tool▁calls▁begin｜>, [TOOL_CALLS], <|python_tag|> or Llama 3's headers) and
// <think>.
ParserFamily DetectParserFamily(std::string_view chat_template_source);

// `tool_format`: a ToolFormatFromName name, or "auto" for the template's; `reasoning`:
// "think", "none", or "auto" for the template's. INVALID_ARGUMENT naming the value.
absl::StatusOr<ParserFamily> ParserFamilyFromNames(std::string_view tool_format,
                                                   std::string_view reasoning,
                                                   std::string_view chat_template_source);

// The parser of one sequence: reasoning first (when the family thinks), then tool calls
// (when `parse_tools` and the family has a format). `prompt_text` is the rendered
// prompt (an open <think> at its end means the output starts as reasoning). Never null:
// with neither, all text is content.
std::unique_ptr<OutputParser> NewOutputParser(const ParserFamily& family,
                                              std::string_view prompt_text, bool parse_tools);

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_PARSER_FAMILY_H_

#include "runtime/router/tool_calls/parser_family.h"

#include <utility>

#include "fmt/format.h"
#include "runtime/router/tool_calls/reasoning_parser.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Reasoning, then tool calls on the content.
class ChainedParser : public OutputParser {
 public:
  ChainedParser(std::unique_ptr<OutputParser> reasoning, std::unique_ptr<OutputParser> tools)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

  OutputDelta Push(std::string_view text) override {
    if (reasoning_) return Chain(reasoning_->Push(text), false);
    OutputDelta all;
    all.content = std::string(text);
    return Chain(std::move(all), false);
  }
  OutputDelta Finish() override {
    return Chain(reasoning_ ? reasoning_->Finish() : OutputDelta{}, true);
  }

 private:
  OutputDelta Chain(OutputDelta first, bool final) {
    if (tools_ == nullptr) return first;
    OutputDelta out;
    out.reasoning = std::move(first.reasoning);
    out.Append(first.content.empty() ? OutputDelta{} : tools_->Push(first.content));
    if (final) out.Append(tools_->Finish());
    return out;
  }

  std::unique_ptr<OutputParser> reasoning_;
  std::unique_ptr<OutputParser> tools_;
};

}  // namespace

std::string_view ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kNone:
      return "none";
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kLlama3Json:
      return "llama3_json";
    case ToolFormat::kDeepSeekV3:
      return "deepseek_v3";
    case ToolFormat::kMistral:
      return "mistral";
  }
  return "none";
}

absl::StatusOr<ToolFormat> ToolFormatFromName(std::string_view name) {
  if (name == "qwen") return ToolFormat::kHermes;
  for (ToolFormat format : {ToolFormat::kNone, ToolFormat::kHermes, ToolFormat::kLlama3Json,
                            ToolFormat::kDeepSeekV3, ToolFormat::kMistral}) {
    if (ToolFormatName(format) == name) return format;
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown tool-call format '{}' (auto, none, hermes, qwen, llama3_json, "
                  "deepseek_v3, mistral)",
                  name));
}

ParserFamily DetectParserFamily(std::string_view source) {
  ParserFamily family;
  if (Contains(source, kHermesOpen)) {
    family.tools = ToolFormat::kHermes;
  } else if (Contains(source, kDeepSeekCallsBegin)) {
    family.tools = ToolFormat::kDeepSeekV3;
  } else if (Contains(source, kMistralToolCalls)) {
    family.tools = ToolFormat::kMistral;
  } else if (Contains(source, kPythonTag) ||
             Contains(source, "<|start_header_id|>")) {
    family.tools = ToolFormat::kLlama3Json;
  }
  family.reasoning = Contains(source, kThinkClose);
  return family;
}

absl::StatusOr<ParserFamily> ParserFamilyFromNames(std::string_view tool_format,
                                                   std::string_view reasoning,
                                                   std::string_view chat_template_source) {
  ParserFamily family = DetectParserFamily(chat_template_source);
  if (tool_format != "auto") {
    absl::StatusOr<ToolFormat> format = ToolFormatFromName(tool_format);
    if (!format.ok()) return format.status();
    family.tools = *format;
  }
  if (reasoning == "think") {
    family.reasoning = true;
  } else if (reasoning == "none") {
    family.reasoning = false;
  } else if (reasoning != "auto") {
    return absl::InvalidArgumentError(
        fmt::format("unknown reasoning format '{}' (auto, none, think)", reasoning));
  }
  return family;
}

std::unique_ptr<OutputParser> NewOutputParser(const ParserFamily& family,
                                              std::string_view prompt_text, bool parse_tools) {
  std::unique_ptr<OutputParser> reasoning;
  if (family.reasoning) {
    reasoning = std::make_unique<ReasoningParser>(PromptOpensThinking(prompt_text));
  }
  std::unique_ptr<OutputParser> tools;
  if (parse_tools) {
    switch (family.tools) {
      case ToolFormat::kNone:
        break;
      case ToolFormat::kHermes:
        tools = NewHermesParser();
        break;
      case ToolFormat::kLlama3Json:
        tools = NewLlama3JsonParser();
        break;
      case ToolFormat::kDeepSeekV3:
        tools = NewDeepSeekV3Parser();
        break;
      case ToolFormat::kMistral:
        tools = NewMistralParser();
        break;
    }
  }
  return std::make_unique<ChainedParser>(std::move(reasoning), std::move(tools));
}

}  // namespace lockstep::router::tool_calls

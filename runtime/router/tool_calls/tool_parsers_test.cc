// The per-family parsers on completions written in each format, fed whole, byte by
// byte, at every split point and in seeded random pieces: every feeding gives the same
// content, reasoning and calls, and a call's first delta carries its name.
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/config/deployment_config.h"
#include "runtime/router/tool_calls/call_object_scanner.h"
#include "runtime/router/tool_calls/parser_family.h"
#include "runtime/router/tool_calls/reasoning_parser.h"
#include "runtime/router/tool_calls/template_messages.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

using Factory = std::function<std::unique_ptr<OutputParser>()>;

// Feeds `pieces`; checks the stream's shape; returns the merged output.
ParsedOutput Feed(const Factory& factory, const std::vector<std::string>& pieces) {
  std::unique_ptr<OutputParser> parser = factory();
  ParsedOutput out;
  std::vector<bool> named;
  auto take = [&](const OutputDelta& delta) {
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (static_cast<size_t>(call.index) >= named.size()) named.resize(call.index + 1);
      // The first delta of a call names it; later ones never do.
      EXPECT_EQ(!call.name.empty(), !named[call.index]) << "call " << call.index;
      named[call.index] = true;
    }
    out.Add(delta);
  };
  for (const std::string& piece : pieces) take(parser->Push(piece));
  take(parser->Finish());
  return out;
}

// Every way of feeding `text` gives the same output, which is returned.
ParsedOutput RunAllSplits(const Factory& factory, const std::string& text) {
  const ParsedOutput whole = Feed(factory, {text});
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  auto same = [&](const ParsedOutput& got, const std::string& how) {
    EXPECT_EQ(got.content, whole.content) << how;
    EXPECT_EQ(got.reasoning, whole.reasoning) << how;
    EXPECT_EQ(got.tool_calls, whole.tool_calls) << how;
  };
  same(Feed(factory, bytes), "byte by byte");
  for (size_t i = 1; i < text.size(); ++i) {
    same(Feed(factory, {text.substr(0, i), text.substr(i)}), "split at " + std::to_string(i));
  }
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 7)(rng);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    same(Feed(factory, pieces), "random pieces");
  }
  return whole;
}

nlohmann::json Args(const ToolCall& call) {
  return nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
}

TEST(HermesParser, ContentThenTwoCalls) {
  const ParsedOutput out = RunAllSplits(
      NewHermesParser,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Pa}r\\\"is\", \"days\": [1, {\"x\": 2}]}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"get_time\", \"arguments\": {}}\n</tool_call>\n");
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Args(out.tool_calls[0]),
            nlohmann::json::parse(R"({"city": "Pa}r\"is", "days": [1, {"x": 2}]})"));
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  EXPECT_EQ(out.tool_calls[1].arguments, "{}");
}

TEST(HermesParser, PlainTextAndLookalikes) {
  const std::string text = "a <tool b < c <tool_cal";
  const ParsedOutput out = RunAllSplits(NewHermesParser, text);
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(HermesParser, NotACallStaysContent) {
  const std::string text = "<tool_call>{\"tool\": 1}</tool_call> done";
  const ParsedOutput out = RunAllSplits(NewHermesParser, text);
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(HermesParser, ArgumentsBeforeNameAndAsString) {
  const ParsedOutput out = RunAllSplits(
      NewHermesParser,
      "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"f\"}</tool_call><tool_call>{\"name\": "
      "\"g\", \"arguments\": \"{\\\"y\\\": 2}\"}</tool_call><tool_call>{\"name\": \"h\"}"
      "</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 3u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"f", "{\"x\": 1}"}));
  EXPECT_EQ(out.tool_calls[1], (ToolCall{"g", "{\"y\": 2}"}));
  EXPECT_EQ(out.tool_calls[2], (ToolCall{"h", "{}"}));
  EXPECT_EQ(out.content, "");
}

TEST(HermesParser, CutShortKeepsWhatCame) {
  const ParsedOutput out =
      RunAllSplits(NewHermesParser, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"f", "{\"x\": 1"}));
}

TEST(HermesParser, ArgumentsStreamBeforeTheCallEnds) {
  std::unique_ptr<OutputParser> parser = NewHermesParser();
  OutputDelta first = parser->Push("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x");
  ASSERT_EQ(first.tool_calls.size(), 2u);
  EXPECT_EQ(first.tool_calls[0], (ToolCallDelta{0, "f", ""}));
  EXPECT_EQ(first.tool_calls[1], (ToolCallDelta{0, "", "{\"a\": \"x"}));
  OutputDelta second = parser->Push("y\"}}</tool_call>");
  ASSERT_EQ(second.tool_calls.size(), 1u);
  EXPECT_EQ(second.tool_calls[0], (ToolCallDelta{0, "", "y\"}"}));
}

TEST(Llama3JsonParser, CallsSeparatedBySemicolons) {
  const ParsedOutput out = RunAllSplits(
      NewLlama3JsonParser,
      " {\"name\": \"f\", \"parameters\": {\"a\": [1, 2]}}; {\"name\": \"g\", \"parameters\": "
      "{}}");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"f", "{\"a\": [1, 2]}"}));
  EXPECT_EQ(out.tool_calls[1], (ToolCall{"g", "{}"}));
  EXPECT_EQ(out.content, "");
}

TEST(Llama3JsonParser, PythonTagAndPlainAnswers) {
  const ParsedOutput tagged =
      RunAllSplits(NewLlama3JsonParser, "<|python_tag|>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(tagged.tool_calls.size(), 1u);
  EXPECT_EQ(tagged.tool_calls[0].name, "f");
  for (const std::string text : {"Hello {x}", " The answer", "{\"a\": 1} is JSON"}) {
    const ParsedOutput plain = RunAllSplits(NewLlama3JsonParser, text);
    EXPECT_EQ(plain.content, text);
    EXPECT_TRUE(plain.tool_calls.empty());
  }
}

TEST(DeepSeekV3Parser, FencedCalls) {
  const ParsedOutput out = RunAllSplits(
      NewDeepSeekV3Parser,
      "Sure<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(out.content, "Sure");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"get_weather", "{\"city\": \"Paris\"}"}));
  EXPECT_EQ(out.tool_calls[1], (ToolCall{"get_time", "{}"}));
}

TEST(DeepSeekV3Parser, V31Calls) {
  const ParsedOutput out = RunAllSplits(
      NewDeepSeekV3Parser,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"get_weather", "{\"city\": \"Paris\"}"}));
}

TEST(MistralParser, ArrayOfCallsWithAndWithoutTheMarker) {
  for (const std::string prefix : {"[TOOL_CALLS]", "", "[TOOL_CALLS] "}) {
    const ParsedOutput out = RunAllSplits(
        NewMistralParser, prefix + "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": "
                                   "\"g\", \"arguments\": {}}]");
    EXPECT_EQ(out.content, "") << prefix;
    ASSERT_EQ(out.tool_calls.size(), 2u) << prefix;
    EXPECT_EQ(out.tool_calls[0], (ToolCall{"f", "{\"a\": 1}"}));
    EXPECT_EQ(out.tool_calls[1], (ToolCall{"g", "{}"}));
  }
}

TEST(MistralParser, NameArgsFormAndPlainArrays) {
  const ParsedOutput out =
      RunAllSplits(NewMistralParser, "Ok.[TOOL_CALLS]f[ARGS]{\"a\": \"]\"}[TOOL_CALLS]g[ARGS]{}");
  EXPECT_EQ(out.content, "Ok.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"f", "{\"a\": \"]\"}"}));
  EXPECT_EQ(out.tool_calls[1], (ToolCall{"g", "{}"}));
  const ParsedOutput plain = RunAllSplits(NewMistralParser, "[1, 2] and [x]");
  EXPECT_EQ(plain.content, "[1, 2] and [x]");
  EXPECT_TRUE(plain.tool_calls.empty());
}

TEST(ReasoningParser, ThinkBlockThenAnswer) {
  const ParsedOutput out =
      RunAllSplits([] { return std::make_unique<ReasoningParser>(false); },
                   "<think>\nStep 1.\n\nStep 2.\n</think>\n\nThe answer.");
  EXPECT_EQ(out.reasoning, "Step 1.\n\nStep 2.");
  EXPECT_EQ(out.content, "The answer.");
}

TEST(ReasoningParser, OpenedByThePromptOrAbsent) {
  const ParsedOutput opened = RunAllSplits(
      [] { return std::make_unique<ReasoningParser>(true); }, "Hmm.\n</think>\n\nYes.");
  EXPECT_EQ(opened.reasoning, "Hmm.");
  EXPECT_EQ(opened.content, "Yes.");
  const ParsedOutput absent =
      RunAllSplits([] { return std::make_unique<ReasoningParser>(false); }, " <thin> Yes.");
  EXPECT_EQ(absent.reasoning, "");
  EXPECT_EQ(absent.content, " <thin> Yes.");
  EXPECT_TRUE(PromptOpensThinking("<｜Assistant｜><think>\n"));
  EXPECT_FALSE(PromptOpensThinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensThinking("<|im_start|>assistant\n"));
}

TEST(NewOutputParser, ReasoningThenToolCalls) {
  const ParserFamily family{ToolFormat::kHermes, true};
  const ParsedOutput out = RunAllSplits(
      [&] { return NewOutputParser(family, "<|im_start|>assistant\n", true); },
      "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": "
      "{\"c\": 1}}\n</tool_call>");
  EXPECT_EQ(out.reasoning, "I need the weather.");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0], (ToolCall{"w", "{\"c\": 1}"}));
  // Without tools in the request the call is text.
  const ParsedOutput text = Feed([&] { return NewOutputParser(family, "", false); },
                                {"<tool_call>{\"name\": \"w\"}</tool_call>"});
  EXPECT_EQ(text.content, "<tool_call>{\"name\": \"w\"}</tool_call>");
  EXPECT_TRUE(text.tool_calls.empty());
}

TEST(ParserFamily, DetectedFromTemplatesAndNamed) {
  EXPECT_EQ(DetectParserFamily("{{- '<tool_call>\\n' }}{% if '</think>' in c %}"),
            (ParserFamily{ToolFormat::kHermes, true}));
  EXPECT_EQ(DetectParserFamily("'<｜tool▁calls▁begin｜>'"),
            (ParserFamily{ToolFormat::kDeepSeekV3, false}));
  EXPECT_EQ(DetectParserFamily("[TOOL_CALLS] "), (ParserFamily{ToolFormat::kMistral, false}));
  EXPECT_EQ(DetectParserFamily("<|start_header_id|>"),
            (ParserFamily{ToolFormat::kLlama3Json, false}));
  EXPECT_EQ(DetectParserFamily("{{ messages }}"), (ParserFamily{}));
  EXPECT_EQ(*ParserFamilyFromNames("mistral", "think", ""),
            (ParserFamily{ToolFormat::kMistral, true}));
  EXPECT_EQ(*ParserFamilyFromNames("qwen", "auto", ""), (ParserFamily{ToolFormat::kHermes, false}));
  const absl::StatusOr<ParserFamily> bad = ParserFamilyFromNames("hermess", "auto", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hermess"), std::string::npos);
  EXPECT_FALSE(ParserFamilyFromNames("auto", "maybe", "").ok());
  // Every name the deployment YAML accepts (model.tool_call_parser, reasoning_parser).
  for (std::string_view name : config::kToolCallParsers) {
    EXPECT_TRUE(ParserFamilyFromNames(name, "auto", "").ok()) << name;
  }
  for (std::string_view name : config::kReasoningParsers) {
    EXPECT_TRUE(ParserFamilyFromNames("auto", name, "").ok()) << name;
  }
}

TEST(MessagesForTemplate, ArgumentsAndContentAsEachFamilyWants) {
  using Json = nlohmann::ordered_json;
  const Json messages = Json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
       "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]}])");
  const Json hermes = MessagesForTemplate(ToolFormat::kHermes, messages);
  EXPECT_EQ(hermes[1]["content"], "");
  EXPECT_EQ(hermes[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":2})");
  EXPECT_EQ(hermes[0], messages[0]);
  Json empty_content = hermes;
  const Json deepseek = MessagesForTemplate(ToolFormat::kDeepSeekV3, empty_content);
  EXPECT_TRUE(deepseek[1]["content"].is_null());
  EXPECT_EQ(deepseek[1]["tool_calls"][0]["function"]["arguments"], R"({"b":1,"a":2})");
}

}  // namespace
}  // namespace lockstep::router::tool_calls

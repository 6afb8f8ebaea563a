// The parsers with real models' chat templates and tokenizers (Qwen 3, DeepSeek V3,
// Llama 3, installed by tokenizer/testdata/setup_reference.sh): the family is detected
// from the template; the template renders the tools, an earlier assistant tool call and
// its tool result; a completion written in the family's format is tokenized and
// streamed token by token through the decoder as the router streams it (special tokens
// skipped), and parses to the call, its arguments arriving in several fragments. The
// assistant call the template rendered parses back to the call it was given.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/tool_calls/parser_family.h"
#include "runtime/router/tool_calls/template_messages.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::router::tool_calls {
namespace {

using Json = nlohmann::ordered_json;

struct Case {
  std::string name;
  ParserFamily family;
  std::string completion;        // the model's output, special tokens included
  std::string assistant_header;  // the rendered prompt's last assistant turn starts here
};

Json Tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather of a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]}}}])");
}

// An earlier turn as an OpenAI client sends it: the assistant called get_weather
// (content null, arguments a JSON string), the tool answered.
Json Conversation() {
  const Json arguments = Json::parse(R"({"city": "Oslo", "days": 1})");
  return Json::array(
      {{{"role", "user"}, {"content", "Weather in Oslo?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         Json::array({{{"id", "call_1"},
                       {"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"arguments", arguments.dump()}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny, 21 C"}},
       {{"role", "user"}, {"content", "And in Zürich for 3 days?"}}});
}

// Streams `completion` token by token as the router does; returns the merged output
// and how many pushes carried argument fragments.
ParsedOutput Stream(const tok::HfTokenizer& tokenizer, const ParserFamily& family,
                    const std::string& prompt, const std::string& completion,
                    int* argument_pushes) {
  std::unique_ptr<OutputParser> parser = NewOutputParser(family, prompt, /*parse_tools=*/true);
  tok::DecodeStream decode = tokenizer.NewDecodeStream(/*skip_special_tokens=*/true);
  ParsedOutput out;
  *argument_pushes = 0;
  auto take = [&](const OutputDelta& delta) {
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (!call.arguments.empty()) {
        ++*argument_pushes;
        break;
      }
    }
    out.Add(delta);
  };
  for (int32_t id : tokenizer.Encode(completion)) take(parser->Push(decode.Push(id)));
  take(parser->Push(decode.Flush()));
  take(parser->Finish());
  return out;
}

class TemplateRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(TemplateRoundTrip, RendersToolsAndParsesTheFamilysCalls) {
  const Case& c = GetParam();
  const absl::StatusOr<tok::testing::Reference> reference = tok::testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<tok::ChatTemplate> chat =
      tok::ChatTemplate::FromTokenizerConfigFile(reference->TokenizerConfig(c.name));
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> tokenizer =
      tok::HfTokenizer::LoadFromFile(reference->TokenizerJson(c.name));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(DetectParserFamily(chat->source()), c.family);

  const Json messages = MessagesForTemplate(c.family.tools, Conversation());
  const absl::StatusOr<std::string> prompt =
      chat->Render(messages, Tools(), /*add_generation_prompt=*/true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_NE(prompt->find("Sunny, 21 C"), std::string::npos) << *prompt;
  if (c.family.tools == ToolFormat::kHermes) {  // the only one of the three that lists tools
    EXPECT_NE(prompt->find("\"description\": \"Weather of a city\""), std::string::npos)
        << *prompt;
  }

  int argument_pushes = 0;
  const ParsedOutput out = Stream(**tokenizer, c.family, *prompt, c.completion, &argument_pushes);
  ASSERT_EQ(out.tool_calls.size(), 1u) << out.content;
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(out.tool_calls[0].arguments),
            Json::parse(R"({"city": "Zürich", "days": 3})"));
  EXPECT_GT(argument_pushes, 1) << "the arguments came in one piece: not streamed";
  if (c.family.reasoning) EXPECT_EQ(out.reasoning, "The user wants the weather.");

  // The earlier call as the template wrote it parses back to that call.
  if (c.assistant_header.empty()) return;
  const size_t turn = prompt->find(c.assistant_header);
  ASSERT_NE(turn, std::string::npos) << *prompt;
  const std::string rendered_call = prompt->substr(turn + c.assistant_header.size());
  const ParsedOutput back = Stream(**tokenizer, ParserFamily{c.family.tools, false}, "",
                                   rendered_call, &argument_pushes);
  ASSERT_GE(back.tool_calls.size(), 1u) << rendered_call;
  EXPECT_EQ(back.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(back.tool_calls[0].arguments),
            Json::parse(R"({"city": "Oslo", "days": 1})"));
}

INSTANTIATE_TEST_SUITE_P(
    Families, TemplateRoundTrip,
    ::testing::Values(
        Case{"qwen3", {ToolFormat::kHermes, true},
             "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
             "\"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 3}}\n"
             "</tool_call><|im_end|>",
             "<|im_start|>assistant\n"},
        Case{"deepseek_v3", {ToolFormat::kDeepSeekV3, false},
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
             "```json\n{\"city\": \"Zürich\", \"days\": 3}\n```<｜tool▁call▁end｜>"
             "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
             "<｜Assistant｜>"},
        Case{"llama3", {ToolFormat::kLlama3Json, false},
             "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\", \"days\": 3}}"
             "<|eot_id|>",
             ""}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace lockstep::router::tool_calls

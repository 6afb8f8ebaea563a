// Tools, tool_choice, parallel_tool_calls and include_reasoning on /v1/chat/completions:
// the options' validation (400 naming the problem), and responses of a model whose
// template writes Hermes tool calls and <think> reasoning: tool_calls with ids and
// arguments as a JSON string, finish_reason "tool_calls", reasoning_content, and the
// streamed deltas (a call's first delta carries id, type and name; then argument
// fragments), fed one token (here: one byte) at a time.
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/http/openai_tools.h"
#include "runtime/router/testing/test_tokenizer.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

// The test tokenizer (ids 0..255 are the bytes) with a Qwen-like template: tools listed,
// tool calls written as <tool_call>, tool results as <tool_response>, thinking.
const ServingTokenizer& HermesTokenizer() {
  static const ServingTokenizer* tokenizer = [] {
    absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> hf =
        tok::HfTokenizer::FromJson(testing::TokenizerJson().dump(), "test");
    EXPECT_THAT(hf, IsOk());
    absl::StatusOr<tok::ChatTemplate> chat = tok::ChatTemplate::FromSource(
        "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>"
        "{% endif %}{% for m in messages %}"
        "{% if m.role == 'tool' %}<tool_response>{{ m.content }}</tool_response>"
        "{% else %}[{{ m.role }}:{{ m.content }}"
        "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ c.function.name }}\", "
        "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}]"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}>{% endif %}"
        "{# reasoning: '</think>' #}");
    EXPECT_THAT(chat, IsOk());
    return new ServingTokenizer(std::shared_ptr<const tok::HfTokenizer>(*std::move(hf)),
                                std::make_shared<const tok::ChatTemplate>(*std::move(chat)));
  }();
  return *tokenizer;
}

constexpr char kTools[] = R"("tools": [{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time"}}])";

std::string ChatBody(const std::string& extra) {
  return R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], )" + extra + "}";
}

absl::Status ParseStatus(const std::string& extra) {
  return ParseOpenAiRequest(ApiKind::kChat, ChatBody(extra), HermesTokenizer()).status();
}

TEST(OpenAiToolsTest, BadToolOptionsAre400NamingTheProblem) {
  struct Bad {
    std::string extra;
    std::string param;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {R"("tools": {"a": 1})", "tools", "tools must be an array"},
      {R"("tools": [{"type": "code"}])", "tools", "tools[0] must be an object with \"type\""},
      {R"("tools": [{"type": "function", "function": {"name": "bad name"}}])", "tools",
       "tools[0].function.name must be a string of 1 to 64"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}])",
       "tools", "parameters must be a JSON schema object"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}},
                    {"type": "function", "function": {"name": "f"}}])",
       "tools", "'f' is used twice"},
      {std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})",
       "tool_choice", "names the function 'g', which is not in tools"},
      {std::string(kTools) + R"(, "tool_choice": "sometimes")", "tool_choice",
       "tool_choice must be \"none\", \"auto\", \"required\""},
      {std::string(kTools) + R"(, "tool_choice": "required", "response_format":
        {"type": "json_object"})",
       "response_format", "together with a forced tool call"},
      {std::string(kTools) + R"(, "parallel_tool_calls": "yes")", "parallel_tool_calls",
       "must be a boolean"},
      {R"("tool_choice": "required")", "tool_choice", "needs tools"},
      {R"("include_reasoning": 1)", "include_reasoning", "must be a boolean"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.extra);
    const absl::Status status = ParseStatus(c.extra);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
    EXPECT_EQ(ParamOf(status), c.param);
  }
  EXPECT_THAT(ParseStatus(std::string(kTools) + R"(, "tool_choice": "none")"), IsOk());
}

TEST(OpenAiToolsTest, RequiredAndNamedToolChoiceForceACallThroughAGrammar) {
  for (const char* choice : {R"("required")", R"({"type": "function", "function":
                                                  {"name": "get_time"}})"}) {
    SCOPED_TRACE(choice);
    const absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
        ApiKind::kChat, ChatBody(std::string(kTools) + R"(, "tool_choice": )" + choice),
        HermesTokenizer());
    ASSERT_THAT(parsed, IsOk());
    EXPECT_TRUE(parsed->parse_tool_calls);
    ASSERT_TRUE(parsed->request.sampling.grammar.has_value());
    EXPECT_THAT(parsed->request.sampling.grammar->text, HasSubstr("<tool_call>"));
    EXPECT_THAT(parsed->request.sampling.grammar->text, HasSubstr("get_time"));
  }
  const absl::StatusOr<OpenAiRequest> json_object = ParseOpenAiRequest(
      ApiKind::kChat, ChatBody(std::string(kTools) + R"(, "response_format":
          {"type": "json_object"})"), HermesTokenizer());
  ASSERT_THAT(json_object, IsOk());
  ASSERT_TRUE(json_object->request.sampling.grammar.has_value());
  EXPECT_EQ(json_object->request.sampling.grammar->kind, grammar::GrammarSpec::Kind::kJsonObject);
}

TEST(OpenAiToolsTest, ToolsAndToolMessagesReachTheTemplate) {
  const absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      ApiKind::kChat,
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
           "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}], )" +
          std::string(kTools) + "}",
      HermesTokenizer());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->prompt_text,
            "<tools>get_weather;get_time;</tools>[user:hi][assistant:<tool_call>{\"name\": "
            "\"get_time\", \"arguments\": {\"tz\": \"UTC\"}}</tool_call>]"
            "<tool_response>12:00</tool_response>>");
  EXPECT_TRUE(parsed->parse_tool_calls);
  EXPECT_EQ(parsed->output_family,
            (tool_calls::ParserFamily{tool_calls::ToolFormat::kHermes, true}));
}

constexpr char kCompletion[] =
    "<think>\nWeather needed.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
    "\"arguments\": {}}\n</tool_call>";

OpenAiRequest Request(const std::string& extra, bool stream) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      ApiKind::kChat, ChatBody(std::string(kTools) + extra + (stream ? R"(, "stream": true)" : "")),
      HermesTokenizer());
  EXPECT_THAT(parsed, IsOk());
  return *parsed;
}

RequestResult Stopped() {
  RequestResult result;
  result.finish_reason = v1::FINISH_REASON_STOP;
  return result;
}

json WholeResponse(const OpenAiRequest& request) {
  OpenAiResponseWriter writer(request, "chatcmpl-1", 0, HermesTokenizer());
  for (unsigned char c : std::string(kCompletion)) writer.Append(TokenDelta{{c}, {}});
  return json::parse(writer.Body(Stopped()));
}

TEST(OpenAiToolsTest, ResponseHasToolCallsAndReasoning) {
  const json body = WholeResponse(Request("", false));
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& message = choice["message"];
  EXPECT_EQ(message["content"], "Checking.");
  EXPECT_EQ(message["reasoning_content"], "Weather needed.");
  ASSERT_EQ(message["tool_calls"].size(), 2u) << message;
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_THAT(call["id"].get<std::string>(), ::testing::StartsWith("call_"));
  EXPECT_NE(call["id"], message["tool_calls"][1]["id"]);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(message["tool_calls"][1]["function"]["arguments"], "{}");
}

TEST(OpenAiToolsTest, OptionsDropReasoningAndLaterCalls) {
  const json message =
      WholeResponse(Request(R"(, "include_reasoning": false, "parallel_tool_calls": false)",
                            false))["choices"][0]["message"];
  EXPECT_FALSE(message.contains("reasoning_content"));
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  // tool_choice "none": the calls are text; the reasoning is still apart.
  const json none =
      WholeResponse(Request(R"(, "tool_choice": "none")", false))["choices"][0];
  EXPECT_EQ(none["finish_reason"], "stop");
  EXPECT_FALSE(none["message"].contains("tool_calls"));
  EXPECT_THAT(none["message"]["content"].get<std::string>(), HasSubstr("<tool_call>"));
  EXPECT_EQ(none["message"]["reasoning_content"], "Weather needed.");
}

TEST(OpenAiToolsTest, StreamedDeltasAsOpenAiStreamsThem) {
  const OpenAiRequest request = Request("", true);
  OpenAiResponseWriter writer(request, "chatcmpl-1", 0, HermesTokenizer());
  std::vector<json> deltas;
  std::string finish;
  auto take = [&](const std::string& events) {
    for (size_t pos = 0; (pos = events.find("data: ", pos)) != std::string::npos;) {
      const size_t end = events.find("\n\n", pos);
      const std::string payload = events.substr(pos + 6, end - pos - 6);
      pos = end;
      if (payload == "[DONE]") continue;
      const json event = json::parse(payload);
      deltas.push_back(event["choices"][0]["delta"]);
      if (!event["choices"][0]["finish_reason"].is_null()) {
        finish = event["choices"][0]["finish_reason"];
      }
    }
  };
  for (unsigned char c : std::string(kCompletion)) take(writer.StreamEvent(TokenDelta{{c}, {}}));
  take(writer.StreamEnd(Stopped()));
  EXPECT_EQ(finish, "tool_calls");
  std::string content, reasoning;
  std::vector<json> calls(2);
  std::vector<int> call_deltas(2, 0);
  for (const json& delta : deltas) {
    content += delta.value("content", "");
    reasoning += delta.value("reasoning_content", "");
    for (const json& call : delta.value("tool_calls", json::array())) {
      const int index = call["index"];
      ASSERT_LT(index, 2);
      if (call_deltas[index]++ == 0) {  // the first delta of a call names it
        EXPECT_THAT(call["id"].get<std::string>(), ::testing::StartsWith("call_"));
        EXPECT_EQ(call["type"], "function");
        calls[index] = call;
      } else {
        EXPECT_FALSE(call.contains("id")) << call;
        EXPECT_FALSE(call["function"].contains("name")) << call;
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() +
            call["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(reasoning, "Weather needed.");
  EXPECT_GT(call_deltas[0], 3) << "the arguments were not streamed";
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(calls[1]["function"]["arguments"], "{}");
  // The streamed ids are the whole response's.
  const json whole = WholeResponse(Request("", false))["choices"][0]["message"]["tool_calls"];
  EXPECT_EQ(calls[0]["id"], whole[0]["id"]);
}

}  // namespace
}  // namespace lockstep::router

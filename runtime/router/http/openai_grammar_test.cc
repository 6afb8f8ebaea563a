// response_format and forced tool calls as grammars: what each accepts (run through a
// grammar::Matcher over a byte vocabulary), and 400s naming the problem.
#include "runtime/router/http/openai_grammar.h"

#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grammar/matcher.h"
#include "gtest/gtest.h"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;
using tool_calls::ToolFormat;

// Whether `text` is a complete output of `spec` (one token per byte).
bool Accepts(const grammar::GrammarSpec& spec, const std::string& text) {
  auto vocabulary = std::make_shared<grammar::Vocabulary>();
  for (int b = 0; b < 256; ++b) vocabulary->token_bytes.push_back(std::string(1, char(b)));
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled =
      grammar::Compile(spec, vocabulary);
  EXPECT_THAT(compiled, IsOk());
  if (!compiled.ok()) return false;
  grammar::Matcher matcher(*compiled);
  for (unsigned char c : text) {
    if (!matcher.AcceptToken(c)) return false;
  }
  return matcher.CanTerminate();
}

TEST(OpenAiGrammarTest, ResponseFormat) {
  EXPECT_EQ(*ResponseFormatGrammar(json::object()), std::nullopt);
  EXPECT_EQ(*ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "text"}})")),
            std::nullopt);
  absl::StatusOr<std::optional<grammar::GrammarSpec>> object =
      ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_THAT(object, IsOk());
  ASSERT_TRUE(object->has_value());
  EXPECT_TRUE(Accepts(**object, R"({"a": [1, {}]})"));
  EXPECT_FALSE(Accepts(**object, "[1]"));

  absl::StatusOr<std::optional<grammar::GrammarSpec>> schema =
      ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "json_schema",
          "json_schema": {"name": "p", "strict": true, "schema": {"type": "object",
          "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": false}}}})"));
  ASSERT_THAT(schema, IsOk());
  ASSERT_TRUE(schema->has_value());
  EXPECT_EQ((*schema)->kind, grammar::GrammarSpec::Kind::kJsonSchema);
  EXPECT_TRUE(Accepts(**schema, R"({"n": 3})"));
  EXPECT_FALSE(Accepts(**schema, R"({"n": "3"})"));
  EXPECT_FALSE(Accepts(**schema, R"({})"));
}

TEST(OpenAiGrammarTest, BadResponseFormatsAre400NamingTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("json")", "must be an object with a \"type\""},
      {R"({"type": "xml"})", "response_format.type must be"},
      {R"({"type": "json_schema"})", "json_schema must be an object"},
      {R"({"type": "json_schema", "json_schema": {"schema": {}}})", "name must be a string"},
      {R"({"type": "json_schema", "json_schema": {"name": "x", "schema": 3}})",
       "must be a JSON schema object"},
      {R"({"type": "json_schema", "json_schema": {"name": "x", "schema":
          {"type": "string", "uniqueItems": true}}})",
       "does not compile: JSON Schema at '#': keyword 'uniqueItems' is not supported"},
  };
  for (const auto& [format, message] : cases) {
    SCOPED_TRACE(format);
    const absl::Status status =
        ResponseFormatGrammar(json::parse(std::string(R"({"response_format": )") + format + "}"))
            .status();
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
    EXPECT_EQ(ParamOf(status), "response_format");
  }
}

const json& Tools() {
  static const json* tools = new json(json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}}, "required": ["city"],
       "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time"}}])"));
  return *tools;
}

TEST(OpenAiGrammarTest, ForcedCallsInTheFamilysFormat) {
  absl::StatusOr<grammar::GrammarSpec> named =
      ForcedToolCallGrammar(Tools(), "get_weather", ToolFormat::kHermes, true);
  ASSERT_THAT(named, IsOk());
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Accepts(*named, weather));
  EXPECT_FALSE(Accepts(*named, time));
  EXPECT_FALSE(Accepts(*named, weather + "\n" + weather)) << "a named call is one call";
  EXPECT_FALSE(Accepts(*named, "Sure! " + weather));
  EXPECT_FALSE(Accepts(*named, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n"
                               "</tool_call>"))
      << "the parameters' schema holds";

  absl::StatusOr<grammar::GrammarSpec> required =
      ForcedToolCallGrammar(Tools(), "", ToolFormat::kHermes, true);
  ASSERT_THAT(required, IsOk());
  EXPECT_TRUE(Accepts(*required, time));
  EXPECT_TRUE(Accepts(*required, weather + "\n" + time));
  EXPECT_FALSE(Accepts(*required, ""));
  absl::StatusOr<grammar::GrammarSpec> single =
      ForcedToolCallGrammar(Tools(), "", ToolFormat::kHermes, false);
  ASSERT_THAT(single, IsOk());
  EXPECT_FALSE(Accepts(*single, weather + "\n" + time));

  absl::StatusOr<grammar::GrammarSpec> llama =
      ForcedToolCallGrammar(Tools(), "", ToolFormat::kLlama3Json, true);
  ASSERT_THAT(llama, IsOk());
  EXPECT_TRUE(Accepts(*llama, R"({"name": "get_time", "parameters": {}})"));
  EXPECT_TRUE(Accepts(*llama, R"({"name": "get_time", "parameters": {}}; )"
                              R"({"name": "get_weather", "parameters": {"city": "x"}})"));
  EXPECT_FALSE(Accepts(*llama, R"({"name": "get_time", "arguments": {}})"));

  for (ToolFormat format : {ToolFormat::kDeepSeekV3, ToolFormat::kMistral}) {
    const absl::Status status = ForcedToolCallGrammar(Tools(), "", format, true).status();
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("special tokens")));
    EXPECT_EQ(ParamOf(status), "tool_choice");
  }
  json bad = Tools();
  bad[0]["function"]["parameters"]["properties"]["city"]["not"] = json::object();
  const absl::Status status =
      ForcedToolCallGrammar(bad, "get_weather", ToolFormat::kHermes, true).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("keyword 'not' is not supported")));
}

}  // namespace
}  // namespace lockstep::router

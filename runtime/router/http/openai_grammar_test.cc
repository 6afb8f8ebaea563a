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
using json = nlohmann::ordered_json;
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

// The client's key order survives: properties are generated in the order written, not
// sorted (the body used to be read into an unordered JSON, which sorts keys).
TEST(OpenAiGrammarTest, PropertiesComeInTheSchemasKeyOrder) {
  absl::StatusOr<std::optional<grammar::GrammarSpec>> schema =
      ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "json_schema",
          "json_schema": {"name": "p", "schema": {"type": "object",
          "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
          "required": ["zeta", "alpha"], "additionalProperties": false}}}})"));
  ASSERT_THAT(schema, IsOk());
  ASSERT_TRUE(schema->has_value());
  EXPECT_TRUE(Accepts(**schema, R"({"zeta": 1, "alpha": 2})"));
  EXPECT_FALSE(Accepts(**schema, R"({"alpha": 2, "zeta": 1})"));

  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"to": {"type": "string"},
      "cc": {"type": "string"}}, "required": ["to", "cc"], "additionalProperties": false}}}])");
  absl::StatusOr<grammar::GrammarSpec> call =
      ForcedToolCallGrammar(tools, "f", ToolFormat::kHermes, true);
  ASSERT_THAT(call, IsOk());
  EXPECT_TRUE(Accepts(*call, "<tool_call>\n{\"name\": \"f\", \"arguments\": "
                             "{\"to\": \"a\", \"cc\": \"b\"}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(*call, "<tool_call>\n{\"name\": \"f\", \"arguments\": "
                              "{\"cc\": \"b\", \"to\": \"a\"}}\n</tool_call>"));
}

// Local references in a tool's parameters resolve within them (each tool's own $defs,
// also with several tools in an anyOf), and in a response schema against its root.
TEST(OpenAiGrammarTest, LocalRefsResolveInToolsAndResponseSchemas) {
  const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "convert", "parameters": {
        "$defs": {"unit": {"enum": ["c", "f"]},
                  "reading": {"type": "object", "properties": {"unit": {"$ref": "#/$defs/unit"},
                              "next": {"anyOf": [{"$ref": "#/$defs/reading"}, {"type": "null"}]}},
                              "required": ["unit", "next"], "additionalProperties": false}},
        "type": "object", "properties": {"from": {"$ref": "#/$defs/reading"}},
        "required": ["from"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "pick", "parameters": {
        "definitions": {"unit": {"enum": ["k"]}},
        "type": "object", "properties": {"u": {"$ref": "#/definitions/unit"}},
        "required": ["u"], "additionalProperties": false}}}])");
  const std::string convert =
      R"({"name": "convert", "arguments": {"from": {"unit": "c", "next": {"unit": "f", )"
      R"("next": null}}}})";
  const std::string pick = R"({"name": "pick", "arguments": {"u": "k"}})";
  for (const std::string& function : {std::string("convert"), std::string("")}) {
    SCOPED_TRACE(function);
    absl::StatusOr<grammar::GrammarSpec> spec =
        ForcedToolCallGrammar(tools, function, ToolFormat::kLlama3Json, false);
    ASSERT_THAT(spec, IsOk());
    std::string llama = convert;
    llama.replace(llama.find("arguments"), 9, "parameters");
    EXPECT_TRUE(Accepts(*spec, llama));
    EXPECT_FALSE(Accepts(*spec, R"({"name": "convert", "parameters": {"from": {"unit": "k", )"
                                R"("next": null}}})"));
    std::string pick_llama = pick;
    pick_llama.replace(pick_llama.find("arguments"), 9, "parameters");
    EXPECT_EQ(Accepts(*spec, pick_llama), function.empty());
  }
  absl::StatusOr<std::optional<grammar::GrammarSpec>> response =
      ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "json_schema",
          "json_schema": {"name": "r", "schema": {"$defs": {"n": {"type": "integer"}},
          "type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}}}})"));
  ASSERT_THAT(response, IsOk());
  ASSERT_TRUE(response->has_value());
  EXPECT_TRUE(Accepts(**response, "[1, 2]"));
  EXPECT_FALSE(Accepts(**response, R"(["1"])"));
}

// A remote reference, or a cycle of references with no value between, is a 400 naming it.
TEST(OpenAiGrammarTest, RemoteRefsAndRefCyclesAre400s) {
  const json remote = json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"a": {"$ref": "https://x.org/s.json"}},
      "required": ["a"]}}}])");
  absl::Status status = ForcedToolCallGrammar(remote, "f", ToolFormat::kHermes, true).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("\"https://x.org/s.json\" is not inside this schema")));
  EXPECT_EQ(ParamOf(status), "tool_choice");
  const json cycle = json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
      "type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}}])");
  status = ForcedToolCallGrammar(cycle, "f", ToolFormat::kHermes, true).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'$ref' cycle")));
  status = ResponseFormatGrammar(json::parse(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "r", "schema": {"$ref": "other.json#/x"}}}})"))
               .status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("is not inside this schema")));
  EXPECT_EQ(ParamOf(status), "response_format");
}

}  // namespace
}  // namespace lockstep::router

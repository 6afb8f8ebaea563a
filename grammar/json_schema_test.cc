#include "grammar/json_schema.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grammar/testing_match.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

using ::testing::HasSubstr;

struct Case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

TEST(JsonSchemaTest, AcceptsExactlyTheValidTexts) {
  const Case cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
          "required":["b"],"additionalProperties":false})",
       {R"({"a": 1, "b": "x"})", R"({"b":""})", R"( {"a":-5,"b":"\u00e9"} )"},
       {R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1,"b":"x","c":2})", R"({"a":1.5,"b":"x"})",
        "{}"}},
      {R"({"type":"object","properties":{"x":{"type":"boolean"},"y":{"type":"null"},"z":{}}})",
       {"{}", R"({"y":null})", R"({"x":true,"z":[1,{}]})", R"({"x":false,"y":null,"z":"s"})"},
       {R"({"y":null,"x":true})", R"({,"y":null})", R"({"x":true,})"}},
      {R"({"type":"array","items":{"enum":["a",1,null]},"minItems":1,"maxItems":3})",
       {R"(["a"])", R"([1, null, "a"])"},
       {"[]", R"(["a","a","a","a"])", R"(["b"])"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("\n\u00e9x")", "\"\xE2\x82\xAC\xE2\x82\xAC\""},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})",
       {R"("AB-123")"},
       {R"("AB-12")", R"("ab-123")"}},
      {R"({"type":"string","format":"date"})", {R"("2024-01-31")"}, {R"("2024-13-01")"}},
      {R"({"type":"integer","minimum":-12,"maximum":205})",
       {"-12", "0", "7", "99", "205", "100"},
       {"-13", "206", "1000", "-0", "05"}},
      {R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":10})", {"4", "9"}, {"3", "10"}},
      {R"({"type":"number","minimum":-1.5,"maximum":2})",
       {"-1", "-0.25", "0", "1.999", "2", "1"},
       {"2.5", "-2", "3", "-1.75", "2.0"}},
      {R"({"type":["string","null"]})", {"null", R"("s")"}, {"1"}},
      {R"({"anyOf":[{"type":"integer"},{"const":"n/a"}]})", {"42", R"("n/a")"}, {R"("x")"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
          "additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":{"v":2,"next":null}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {"{}", R"({"k": 1, "j": 2})"},
       {R"({"k":"v"})"}},
      {R"({"type":"array","maxItems":0})", {"[]", "[ ]"}, {"[1]"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Grammar> g = JsonSchemaGrammar(c.schema);
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status();
    for (const char* text : c.valid) EXPECT_TRUE(FullMatch(*g, text)) << c.schema << "\n  " << text;
    for (const char* text : c.invalid)
      EXPECT_FALSE(FullMatch(*g, text)) << c.schema << "\n  " << text;
  }
}

TEST(JsonSchemaTest, ErrorsNameTheProblemAndWhere) {
  struct Bad {
    const char* schema;
    const char* message;
  } cases[] = {
      {"{", "not valid JSON"},
      {R"({"type":"object","properties":{"a":{"not":{}}}})",
       "at '/properties/a': keyword 'not' is not supported"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"$ref":"#/$defs/missing"})", "points to nothing"},
      {R"({"$ref":"http://example.com/s.json"})", "not inside this schema"},
      {"{\"type\":\"string\",\"pattern\":\"(?=x)\"}", "lookahead"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no number satisfies the bounds"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "'maxItems' is below 'minItems'"},
      {R"({"type":"string","maxLength":100000})", "not supported"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
       "'$ref' cycle #/$defs/a -> #/$defs/a: the schema refers to itself"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"title":"B","$ref":"#/$defs/a"}},
          "type":"object","properties":{"x":{"$ref":"#/$defs/a"}}})",
       "at '/$defs/b': '$ref' cycle #/$defs/a -> #/$defs/b -> #/$defs/a"},
      {R"({"$ref":"#"})", "'$ref' cycle # -> #"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})",
       "left-recursive"},
      {R"({"$ref":"other.json#/$defs/a"})", "not inside this schema"},
      {R"({"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]})", "can never finish"},
      {R"(false)", "matches nothing"},
      {R"({"allOf":[{},{}]})", "'allOf' with more than one schema"},
  };
  for (const Bad& c : cases) {
    absl::StatusOr<Grammar> g = JsonSchemaGrammar(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr(c.message)) << c.schema;
  }
  std::string deep(300, '[');
  EXPECT_THAT(JsonSchemaGrammar(deep).status().message(), HasSubstr("nested more than 256"));
}

TEST(JsonSchemaTest, WrapMatchesCallsBetweenMarkers) {
  const char* call =
      R"("type":"object","properties":{"name":{"const":"f"}},"required":["name"],
         "additionalProperties":false)";
  absl::StatusOr<Grammar> one = JsonSchemaGrammar(absl::StrCat(
      R"({"x-lockstep-wrap":{"begin":"<c>\n","end":"\n</c>","separator":"\n"},)", call, "}"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(FullMatch(*one, "<c>\n{\"name\": \"f\"}\n</c>"));
  EXPECT_FALSE(FullMatch(*one, "{\"name\": \"f\"}"));
  EXPECT_FALSE(FullMatch(*one, "<c>\n{\"name\":\"f\"}\n</c>\n<c>\n{\"name\":\"f\"}\n</c>"));
  absl::StatusOr<Grammar> many = JsonSchemaGrammar(absl::StrCat(
      R"({"x-lockstep-wrap":{"begin":"<c>","end":"</c>","separator":";","repeat":true},)", call,
      "}"));
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_TRUE(FullMatch(*many, "<c>{\"name\":\"f\"}</c>;<c>{\"name\":\"f\"}</c>"));
  EXPECT_FALSE(FullMatch(*many, "<c>{\"name\":\"f\"}</c>;"));
  absl::StatusOr<Grammar> bad = JsonSchemaGrammar(R"({"x-lockstep-wrap":{"start":"x"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unexpected 'start'"));
}

}  // namespace
}  // namespace lockstep::grammar

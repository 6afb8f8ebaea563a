#include "grammar/regex.h"

#include "gmock/gmock.h"
#include "grammar/json_schema_formats.h"
#include "grammar/testing_match.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

using ::testing::HasSubstr;

bool Whole(std::string_view pattern, std::string_view text) {
  absl::StatusOr<Grammar> g = RegexGrammar(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status();
  return g.ok() && FullMatch(*g, text);
}

// `text` as the content of a JSON string under a JSON Schema pattern.
bool InJsonString(std::string_view pattern, std::string_view json_content) {
  absl::StatusOr<Expr> e = RegexToExpr(pattern, RegexMode::kJsonString);
  EXPECT_TRUE(e.ok()) << pattern << ": " << e.status();
  if (!e.ok()) return false;
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  b.Define(root, *std::move(e));
  absl::StatusOr<Grammar> g = b.Build(root);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() && FullMatch(*g, json_content);
}

TEST(RegexTest, Basics) {
  EXPECT_TRUE(Whole("abc", "abc"));
  EXPECT_FALSE(Whole("abc", "abcd"));
  EXPECT_TRUE(Whole("a|bc|", ""));
  EXPECT_TRUE(Whole("(?:ab)+c?", "ababc"));
  EXPECT_FALSE(Whole("(?:ab)+c?", "c"));
  EXPECT_TRUE(Whole("[a-c]{2,3}", "cab"));
  EXPECT_FALSE(Whole("[a-c]{2,3}", "cabc"));
  EXPECT_TRUE(Whole("x{2}y{1,}z*?", "xxyyy"));
  EXPECT_TRUE(Whole("[^0-9]\\d\\w\\s", "a5_ "));
  EXPECT_FALSE(Whole("[^0-9]", "7"));
  EXPECT_TRUE(Whole("[^0-9]", "\xC3\xA9"));
  EXPECT_TRUE(Whole(".", "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Whole(".", "\n"));
  EXPECT_TRUE(Whole("\\x41\\u00e9\\u{1F600}\\.", "A\xC3\xA9\xF0\x9F\x98\x80."));
  EXPECT_TRUE(Whole("^(a|b)*$", "abba"));
  EXPECT_TRUE(Whole("[-a]+", "-a-"));
  EXPECT_TRUE(Whole("(?<year>\\d{4})", "2026"));
}

TEST(RegexTest, JsonStringModeEscapesAndSearches) {
  EXPECT_TRUE(InJsonString("^a\"b\\\\c$", "a\\\"b\\\\c"));
  EXPECT_FALSE(InJsonString("^a\"b$", "a\"b"));
  EXPECT_TRUE(InJsonString("^\\n$", "\\n"));
  EXPECT_TRUE(InJsonString("^[\\x00-\\x02]$", "\\u0001"));
  EXPECT_TRUE(InJsonString("b", "abc"));  // unanchored: a search
  EXPECT_FALSE(InJsonString("^b", "abc"));
  EXPECT_TRUE(InJsonString("^a", "abc"));
  EXPECT_FALSE(InJsonString("c$", "cab"));
}

TEST(RegexTest, FormatsMatchExamples) {
  auto format = [](std::string_view f, std::string_view text) {
    return InJsonString(FormatRegex(f), text);
  };
  EXPECT_TRUE(format("date", "2026-12-05"));
  EXPECT_FALSE(format("date", "2026-02-30"));
  EXPECT_TRUE(format("time", "23:59:01.5+02:00"));
  EXPECT_TRUE(format("date-time", "2026-12-05T03:25:09Z"));
  EXPECT_TRUE(format("email", "first.last@example.com"));
  EXPECT_FALSE(format("email", ".x@example.com"));
  EXPECT_TRUE(format("uuid", "123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_TRUE(format("uri", "https://example.com/a/b.html"));
  EXPECT_TRUE(format("ipv4", "192.168.0.255"));
  EXPECT_FALSE(format("ipv4", "256.1.1.1"));
  EXPECT_EQ(FormatRegex("color"), "");
}

TEST(RegexTest, UnsupportedAndBadPatternsAreNamed) {
  struct Case {
    const char* pattern;
    const char* message;
  } cases[] = {{"(?=a)", "lookahead"},
               {"a\\1", "back references"},
               {"\\bword", "word boundaries"},
               {"\\p{L}", "property escapes"},
               {"(ab", "missing ')'"},
               {"ab)", "unmatched ')'"},
               {"[ab", "missing ']'"},
               {"*a", "nothing to repeat"},
               {"a{3,2}", "n < m"},
               {"a^b", "'^' is only supported at the start"},
               {"a$b", "'$' is only supported at the end"},
               {"[z-a]", "out of order"},
               {"\\q", "unknown escape"},
               {"(a*)*", "left-recursive"}};
  for (const Case& c : cases) {
    absl::StatusOr<Grammar> g = RegexGrammar(c.pattern);
    ASSERT_FALSE(g.ok()) << c.pattern;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.pattern;
    EXPECT_THAT(g.status().message(), HasSubstr(c.message)) << c.pattern;
  }
}

}  // namespace
}  // namespace lockstep::grammar

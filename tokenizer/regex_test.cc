#include "tokenizer/regex.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The Llama 3 split pattern, as its tokenizer.json spells it.
constexpr char kLlama3[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> Matches(std::string_view pattern, std::string_view text) {
  const absl::StatusOr<Regex> re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  std::vector<std::string> out;
  if (re.ok()) {
    re->ForEachMatch(text, [&](size_t s, size_t e) { out.emplace_back(text.substr(s, e - s)); });
  }
  return out;
}

TEST(RegexTest, Llama3PatternSplitsWordsSpacesAndContractions) {
  // Hand-derived with Oniguruma's leftmost-first backtracking: a run of spaces before a
  // word gives its last space to the word; "\s*[\r\n]+" backtracks to the last newline.
  EXPECT_THAT(Matches(kLlama3, "Hello world's  test\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", " test", "\n\n", " ", " x"));
  EXPECT_THAT(Matches(kLlama3, "12345 abc!!\n"), ElementsAre("123", "45", " abc", "!!\n"));
  EXPECT_THAT(Matches(kLlama3, "   "), ElementsAre("   "));
}

TEST(RegexTest, CaseInsensitiveGroupFoldsAsOniguruma) {
  // U+017F LONG S folds to s (the JavaScript reference differs: it folds ASCII only).
  EXPECT_THAT(Matches("(?i:'s|'ll)", "'S 'LL 'lL '\u017F 'x"),
              ElementsAre("'S", "'LL", "'lL", "'\u017F"));
  EXPECT_THAT(Matches("(?i:[a-c]+)", "xAbCy\u212A"), ElementsAre("AbC"));
}

TEST(RegexTest, WhiteSpaceIsUnicodeWhiteSpace) {
  // \s is White_Space: U+0085 and U+3000 are in, U+FEFF and U+200B are not.
  EXPECT_THAT(Matches(R"(\s+)", "a\u0085\u3000b\uFEFF\u200Bc"), ElementsAre("\u0085\u3000"));
  EXPECT_THAT(Matches(R"(\S+)", "a\u0085b\uFEFF"), ElementsAre("a", "b\uFEFF"));
}

TEST(RegexTest, ClassesEscapesAndCategories) {
  EXPECT_THAT(Matches("[\u4e00-\u9fa5\u3040-\u309f]+", "ab中文ひらカ"), ElementsAre("中文ひら"));
  EXPECT_THAT(Matches(R"([\x{4E00}-\x{4E01}\u0041]+)", "xA\u4E00\u4E01\u4E02"),
              ElementsAre("A\u4E00\u4E01"));
  EXPECT_THAT(Matches(R"([!"#\-./\[\\\]^_`{|}~][A-Za-z]+)", "x.foo -bar [baz"),
              ElementsAre(".foo", "-bar", "[baz"));
  EXPECT_THAT(Matches(R"([\p{P}\p{S}]+)", "a+b,.c€"), ElementsAre("+", ",.", "€"));
  EXPECT_THAT(Matches(R"(\P{L}+)", "ab12éc!"), ElementsAre("12", "!"));
  EXPECT_THAT(Matches(R"(\p{Lu}\p{Ll}+)", "helloWorld Foo"), ElementsAre("World", "Foo"));
  EXPECT_THAT(Matches(R"([\p{L}\p{M}]+)", "e\u0301x 1"), ElementsAre("e\u0301x"));
}

TEST(RegexTest, GroupsQuantifiersAndLookahead) {
  EXPECT_THAT(Matches("(?:ab)+", "ababa"), ElementsAre("abab"));
  EXPECT_THAT(Matches("(?:a|ab)c", "abc ac"), ElementsAre("abc", "ac"));
  EXPECT_THAT(Matches("(a|b){2,3}", "ababab"), ElementsAre("aba", "bab"));
  EXPECT_THAT(Matches("a{2}", "aaaaa"), ElementsAre("aa", "aa"));
  EXPECT_THAT(Matches("a{2,}", "a aaaa"), ElementsAre("aaaa"));
  EXPECT_THAT(Matches("x(?=y)", "xz xy"), ElementsAre("x"));
  EXPECT_THAT(Matches("a{x}", "a{x}"), ElementsAre("a{x}"));  // not an interval: literal
}

TEST(RegexTest, LongRunsDoNotBlowUp) {
  const std::string spaces(20000, ' ');
  EXPECT_THAT(Matches(kLlama3, spaces + "x"), ElementsAre(spaces.substr(1), " x"));
}

TEST(RegexTest, UnsupportedSyntaxFailsNamingIt) {
  for (const auto& [pattern, what] : std::vector<std::pair<std::string, std::string>>{
           {R"(\d+)", "escape '\\d'"},
           {"a.b", "'.'"},
           {"^a", "'^'"},
           {"a*?", "lazy or possessive"},
           {"(?<=a)b", "lookbehind"},
           {"[[a]]", "nested class"},
           {R"(\p{Foo})", "\\p{Foo}"},
           {"a|", "empty string"},
           {"(?:a*)+", "group that can match empty"},
           {"(?i:é)", "case folding of non-ASCII"},
           {"(a", "missing ')'"},
           {"a)", "unmatched ')'"},
           {"[a", "missing ']'"},
           {"*a", "nothing to repeat"},
           {"a{,2}", "'{,n}'"},
       }) {
    const absl::StatusOr<Regex> re = Regex::Compile(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_THAT(std::string(re.status().message()), HasSubstr(what)) << pattern;
  }
}

}  // namespace
}  // namespace lockstep::tok

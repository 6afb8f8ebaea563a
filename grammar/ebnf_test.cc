#include "grammar/ebnf.h"

#include "gmock/gmock.h"
#include "grammar/testing_match.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

using ::testing::HasSubstr;

constexpr char kArithmetic[] = R"ebnf(
# Arithmetic over integers; a rule may continue on the next line.
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor
           (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
)ebnf";

TEST(EbnfTest, Arithmetic) {
  absl::StatusOr<Grammar> g = EbnfGrammar(kArithmetic);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* good : {"1", "1+2*3", "(1+2)*-3", "10/(2-3)"})
    EXPECT_TRUE(FullMatch(*g, good)) << good;
  for (const char* bad : {"", "1+", "(1", "1**2", "a"}) EXPECT_FALSE(FullMatch(*g, bad)) << bad;
}

TEST(EbnfTest, LiteralsClassesAndRepetitions) {
  absl::StatusOr<Grammar> g = EbnfGrammar(
      "root ::= \"caf\\u00e9\" [^a-z\\n] x{2,3} y? . \"\\x41\"\nx ::= [\\]] \ny ::= \"\\\"\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FullMatch(*g,
                        "caf\xC3\xA9"
                        "Z]]\"\xE2\x82\xAC"
                        "A"));
  EXPECT_TRUE(FullMatch(*g,
                        "caf\xC3\xA9"
                        "-]]]xA"));
  EXPECT_FALSE(FullMatch(*g,
                         "caf\xC3\xA9"
                         "z]]xA"));
  EXPECT_FALSE(FullMatch(*g,
                         "caf\xC3\xA9"
                         "-]xA"));
}

TEST(EbnfTest, ErrorsNameTheProblem) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {{"start ::= \"a\"", "no 'root' rule"},
               {"root ::= a", "'a' is used but never defined"},
               {"root ::= \"a", "line 1 column 12: unterminated string literal"},
               {"root ::= [a-", "unterminated character class"},
               {"root ::= (\"a\"", "expected ')'"},
               {"root ::= \"a\"\nroot ::= \"b\"", "line 2 column 1: rule 'root' is defined twice"},
               {"root ::= root \"a\" | \"b\"", "left-recursive"},
               {"root ::= \"a\"{3,1}", "n < m"},
               {"root ::= \"\\q\"", "unknown escape"},
               {"root = \"a\"", "expected '::='"},
               {"root ::= @", "unexpected '@'"}};
  for (const Case& c : cases) {
    absl::StatusOr<Grammar> g = EbnfGrammar(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr(c.message)) << c.text;
  }
}

}  // namespace
}  // namespace lockstep::grammar

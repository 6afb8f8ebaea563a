#include "grammar/parser.h"

#include <random>
#include <string>

#include "grammar/json_rules.h"
#include "grammar/utf8_ranges.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

// Whether `text` is a complete sentence of `grammar`.
bool Matches(const Grammar& grammar, std::string_view text) {
  Parser parser(&grammar);
  FrameStore store;
  ParseState state = parser.Start(&store);
  return parser.AdvanceAll(&store, text, &state) && state.can_end;
}

TEST(ParserTest, JsonObjectGrammar) {
  absl::StatusOr<Grammar> g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* good :
       {"{}", " { } ", "{\"a\":1}", "{\"a\": [1, 2.5e-3, -0, true, false, null, {}]}",
        "{\"k\\n\\u00e9\": \"caf\xC3\xA9 \xF0\x9F\x98\x80\"}", "{\"a\":{\"b\":{\"c\":[]}}}\n"}) {
    EXPECT_TRUE(Matches(*g, good)) << good;
  }
  for (const char* bad :
       {"", "[]", "{", "{\"a\"}", "{\"a\":01}", "{a:1}", "{\"a\":1,}", "{\"\x01\":1}",
        "{\"\xC3\":1}", "{\"\xED\xA0\x80\":1}", "{\"a\":tru}", "{}x", "{\"a\":\"\\q\"}"}) {
    EXPECT_FALSE(Matches(*g, bad)) << bad;
  }
}

TEST(ParserTest, WhitespaceIsBounded) {
  absl::StatusOr<Grammar> g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, "{" + std::string(kMaxWhitespace, ' ') + "}"));
  EXPECT_FALSE(Matches(*g, "{" + std::string(kMaxWhitespace + 1, ' ') + "}"));
}

TEST(ParserTest, StacksStayFlatInLongStrings) {
  absl::StatusOr<Grammar> g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  Parser parser(&*g);
  FrameStore store;
  ParseState state = parser.Start(&store);
  ASSERT_TRUE(parser.AdvanceAll(&store, "{\"key\": \"", &state));
  ParseState after_one = state;
  ASSERT_TRUE(parser.AdvanceAll(&store, "x", &after_one));
  ParseState after_many = after_one;
  ASSERT_TRUE(parser.AdvanceAll(&store, std::string(1000, 'x'), &after_many));
  EXPECT_EQ(after_one, after_many);  // the tail call reuses the same frames
}

TEST(ParserTest, Utf8ExprMatchesExactlyItsCodePoints) {
  // Random ranges: every code point's encoding matches iff it is inside.
  const uint32_t seed = 20261205;
  std::mt19937 rng(seed);
  for (int round = 0; round < 20; ++round) {
    CodePointRanges ranges;
    for (int i = 0; i < 3; ++i) {
      uint32_t a = rng() % 0x11000, b = a + rng() % 0x3000;
      ranges.push_back({a, b});
    }
    ranges = NormalizeRanges(ranges);
    GrammarBuilder builder;
    int32_t root = builder.Rule("root");
    builder.Define(root, Utf8Expr(ranges));
    absl::StatusOr<Grammar> g = builder.Build(root);
    ASSERT_TRUE(g.ok()) << g.status();
    for (int probe = 0; probe < 300; ++probe) {
      uint32_t cp = rng() % 0x14000;
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      bool inside = false;
      for (auto [lo, hi] : ranges) inside |= lo <= cp && cp <= hi;
      std::string s;
      AppendUtf8(cp, &s);
      EXPECT_EQ(Matches(*g, s), inside) << "seed " << seed << " cp " << cp;
    }
  }
}

}  // namespace
}  // namespace lockstep::grammar

#include "grammar/parser.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_rules.h"
#include "grammar/json_schema.h"
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

// A state as its stacks' (rule, alt, pos) chains, sorted: comparable across stores.
std::vector<std::vector<int32_t>> Spell(const FrameStore& store, const ParseState& state) {
  std::vector<std::vector<int32_t>> stacks;
  for (int32_t top : state.tops) {
    std::vector<int32_t>& stack = stacks.emplace_back();
    for (int32_t id = top; id != 0; id = store.Get(id).parent) {
      const Frame& f = store.Get(id);
      stack.insert(stack.end(), {f.rule, f.alt, f.pos});
    }
  }
  std::sort(stacks.begin(), stacks.end());
  stacks.push_back({state.can_end ? 1 : 0});
  return stacks;
}

// Advance remembers each frame's successor closure in the store: along a random walk,
// every byte's successor state from a store that has advanced many states before equals
// the one from a store that has only replayed the prefix, and its tops stay sorted and
// unique. The schema's enum and anyOf make several stacks take the same byte.
TEST(ParserTest, RememberedSuccessorsGiveTheSameStates) {
  absl::StatusOr<Grammar> object = JsonObjectGrammar();
  ASSERT_TRUE(object.ok());
  absl::StatusOr<Grammar> schema = JsonSchemaGrammar(R"({"type": "object",
      "properties": {"name": {"enum": ["get_weather", "get_forecast", "get"]},
                     "n": {"anyOf": [{"type": "integer"}, {"type": "number"},
                                     {"type": "string", "maxLength": 3}]}},
      "required": ["name", "n"], "additionalProperties": false})");
  ASSERT_TRUE(schema.ok()) << schema.status();
  for (const Grammar* g : {&*object, &*schema}) {
    Parser parser(g);
    const uint32_t seed = 38;
    std::mt19937 rng(seed);
    FrameStore hot;
    ParseState state = parser.Start(&hot);
    std::string prefix;
    int merged = 0;  // advances where several stacks took the byte
    for (int step = 0; step < 60; ++step) {
      FrameStore cold;
      ParseState cold_state = parser.Start(&cold);
      ASSERT_TRUE(parser.AdvanceAll(&cold, prefix, &cold_state)) << "seed " << seed;
      ASSERT_EQ(Spell(hot, state), Spell(cold, cold_state)) << "seed " << seed << " at " << prefix;
      std::vector<uint8_t> alive, inside;
      for (int b = 0; b < 256; ++b) {
        ParseState from_hot, from_cold;
        parser.Advance(&hot, state, static_cast<uint8_t>(b), &from_hot);
        FrameStore fresh = cold;
        parser.Advance(&fresh, cold_state, static_cast<uint8_t>(b), &from_cold);
        EXPECT_TRUE(std::is_sorted(from_hot.tops.begin(), from_hot.tops.end()));
        EXPECT_EQ(std::adjacent_find(from_hot.tops.begin(), from_hot.tops.end()),
                  from_hot.tops.end());
        ASSERT_EQ(Spell(hot, from_hot), Spell(fresh, from_cold))
            << "seed " << seed << " at " << prefix << " byte " << b;
        int taking = 0;
        for (int32_t top : state.tops) taking += parser.NextBytes(hot, top).Contains(b);
        merged += taking > 1;
        if (from_hot.tops.empty()) continue;
        alive.push_back(static_cast<uint8_t>(b));
        if (b > ' ') inside.push_back(static_cast<uint8_t>(b));
      }
      if (alive.empty()) break;
      // Mostly a byte other than whitespace, so the walk gets past the padding.
      const std::vector<uint8_t>& from = !inside.empty() && rng() % 8 != 0 ? inside : alive;
      const uint8_t next = from[rng() % from.size()];
      prefix.push_back(static_cast<char>(next));
      ASSERT_TRUE(parser.AdvanceAll(&hot, std::string(1, static_cast<char>(next)), &state));
    }
    EXPECT_GT(prefix.size(), 10u);
    if (g == &*schema) EXPECT_GT(merged, 0) << prefix;
  }
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

// The mask cache (mask_cache.h): keys independent of a FrameStore's ids, cached masks
// equal to the position tables' at every step, packing both fills, eviction by size;
// and the JSON string lowering that keeps multi-byte characters context-independent.
#include "grammar/mask_cache.h"

#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/follow_bytes.h"
#include "grammar/matcher.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

bool Bit(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1; }

TEST(MaskCacheTest, KeyDependsOnTheStacksNotOnFrameIds) {
  auto vocab = MakeTestingVocabulary(600, 1);
  auto compiled = Compile({GrammarSpec::Kind::kJsonObject, ""}, vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const Parser& parser = (*compiled)->parser();
  FrameStore a, b;
  // b interns every rule's first position first, last rule first: its ids differ.
  const int32_t rules = static_cast<int32_t>(parser.grammar().rules.size());
  for (int32_t r = rules - 1; r >= 0; --r) parser.StartAt(&b, r, 0, 0);
  ParseState in_a = parser.Start(&a), in_b = parser.Start(&b);
  ASSERT_TRUE(parser.AdvanceAll(&a, "{\"name\": ", &in_a));
  ASSERT_TRUE(parser.AdvanceAll(&b, "{\"name\": ", &in_b));
  ASSERT_NE(in_a.tops, in_b.tops);  // different ids for the same stacks
  EXPECT_EQ(MaskCache::Key(a, in_a), MaskCache::Key(b, in_b));
  ParseState later = in_a;
  ASSERT_TRUE(parser.AdvanceAll(&a, "[", &later));
  EXPECT_NE(MaskCache::Key(a, in_a), MaskCache::Key(a, later));
}

TEST(MaskCacheTest, CachedMasksEqualTheTablesAndRecurAcrossRequests) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    auto vocab = MakeTestingVocabulary(1500, seed);
    auto compiled = Compile({GrammarSpec::Kind::kJsonSchema, RandomSchema(seed)}, vocab);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const CompiledGrammar& g = **compiled;
    // The same tokens twice, each time in a FrameStore of its own: the second pass
    // only reads the cache.
    std::vector<int32_t> tokens;
    std::vector<uint32_t> cached(MaskWords(*vocab)), tables(MaskWords(*vocab));
    std::mt19937 rng(seed);
    for (int pass = 0; pass < 2; ++pass) {
      const size_t entries = g.mask_cache().size();
      FrameStore store;
      ParseState state = g.parser().Start(&store);
      for (int step = 0; step < 150; ++step) {
        FillTokenMask(g, &store, state, absl::MakeSpan(cached));
        FillTokenMaskFromTables(g, &store, state, absl::MakeSpan(tables));
        ASSERT_EQ(cached, tables) << "seed " << seed << " pass " << pass << " step " << step;
        if (pass == 0) {
          std::vector<int32_t> allowed;
          for (int32_t t = 0; t < static_cast<int32_t>(vocab->token_bytes.size()); ++t) {
            if (Bit(tables, t) && !g.IsStop(t)) allowed.push_back(t);
          }
          if (allowed.empty()) break;
          tokens.push_back(allowed[rng() % allowed.size()]);
        } else if (step == static_cast<int>(tokens.size())) {
          break;
        }
        ASSERT_TRUE(g.parser().AdvanceAll(&store, vocab->token_bytes[tokens[step]], &state));
      }
      if (pass == 1) EXPECT_EQ(g.mask_cache().size(), entries) << "seed " << seed;
    }
    EXPECT_GT(g.mask_cache().size(), 0u);
  }
}

TEST(MaskCacheTest, PacksBothFillsAndEvictsBeyondCapacity) {
  std::vector<uint32_t> ones(4000, ~0u), zeros(4000, 0u), out(4000);
  ones[17] = 0x1234u;
  zeros[3999] = 0x80000001u;
  MaskCache cache(1 << 20);
  cache.Insert("ones", ones);
  cache.Insert("zeros", zeros);
  ASSERT_TRUE(cache.Lookup("ones", absl::MakeSpan(out)));
  EXPECT_EQ(out, ones);
  ASSERT_TRUE(cache.Lookup("zeros", absl::MakeSpan(out)));
  EXPECT_EQ(out, zeros);
  EXPECT_FALSE(cache.Lookup("other", absl::MakeSpan(out)));
  EXPECT_LT(cache.bytes(), 1000u);  // one differing word each

  // Masks of ~400 bytes packed each in a cache of 1,000 bytes: the oldest go first.
  MaskCache small(1000);
  std::vector<uint32_t> striped(100);
  for (size_t i = 0; i < striped.size(); i += 2) striped[i] = 0x5u;
  for (int i = 0; i < 5; ++i) small.Insert("m" + std::to_string(i), striped);
  EXPECT_LE(small.bytes(), 1000u);
  EXPECT_LT(small.size(), 5u);
  EXPECT_FALSE(small.Lookup("m0", absl::MakeSpan(out).subspan(0, 100)));
  EXPECT_TRUE(small.Lookup("m4", absl::MakeSpan(out).subspan(0, 100)));
}

// A mask whose words mostly differ from both fills is kept whole, and comes back equal
// (also after a lookup into a buffer that held another mask).
TEST(MaskCacheTest, KeepsAMostlyMixedMaskWhole) {
  std::vector<uint32_t> mixed(4000), out(4000, 0xdeadbeefu);
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = static_cast<uint32_t>(i * 2654435761u) | 1u;
  mixed[5] = 0u;
  mixed[6] = ~0u;
  MaskCache cache(1 << 20);
  cache.Insert("mixed", mixed);
  ASSERT_TRUE(cache.Lookup("mixed", absl::MakeSpan(out)));
  EXPECT_EQ(out, mixed);
  EXPECT_LT(cache.bytes(), mixed.size() * sizeof(uint32_t) + 1000);  // not 8 bytes a word
}

// A token of multi-byte characters inside a JSON string is accepted by a position table
// whatever the stack below (the string's characters are alternatives of its loop, not a
// call whose every character leaves the called rule).
TEST(MaskCacheTest, MultiByteStringTokensAreContextIndependent) {
  auto vocab = std::make_shared<Vocabulary>();
  for (int b = 0; b < 256; ++b) vocab->token_bytes.push_back(std::string(1, static_cast<char>(b)));
  std::vector<int32_t> multi_byte;
  for (const char* word : {"caf\xC3\xA9", "\xC3\xA9t\xC3\xA9", "\xE2\x82\xAC" "12",
                           "\xE6\x97\xA5\xE6\x9C\xAC", " \xF0\x9F\x98\x80", "na\xC3\xAFve"}) {
    multi_byte.push_back(static_cast<int32_t>(vocab->token_bytes.size()));
    vocab->token_bytes.push_back(word);
  }
  vocab->stop_tokens = {0};
  for (const char* schema : {R"({"type":"string"})", R"({"type":"string","maxLength":20})"}) {
    auto compiled = Compile({GrammarSpec::Kind::kJsonSchema, schema}, vocab);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const CompiledGrammar& g = **compiled;
    FrameStore store;
    ParseState state = g.parser().Start(&store);
    ASSERT_TRUE(g.parser().AdvanceAll(&store, "\"ab", &state));
    for (int32_t t : multi_byte) {
      bool accepted = false;
      for (int32_t top : state.tops) {
        const PositionTable& table = g.Table(store.Get(top));
        accepted = accepted || ((table.accepted[t >> 5] >> (t & 31)) & 1);
      }
      EXPECT_TRUE(accepted) << schema << ": '" << vocab->token_bytes[t] << "' is left to the walk";
    }
  }
}

}  // namespace
}  // namespace lockstep::grammar

namespace lockstep::grammar {
namespace {

// FOLLOW over bytes: what starts the rest after a reference, through nullable rules and
// from the caller when the reference ends an alternative (follow_bytes.h).
TEST(FollowBytesTest, ThroughNullableRestsAndCallers) {
  auto vocab = MakeTestingVocabulary(300, 1);
  auto compiled = Compile(
      {GrammarSpec::Kind::kEbnf, "root ::= a \"x\" | a b \"z\" | c\na ::= \"q\"*\nb ::= \"y\"?\n"
                                 "c ::= \"w\" a\n"},
      vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const Grammar& g = (*compiled)->grammar();
  const std::vector<ByteSet> follow = FollowBytes(g);
  auto rule = [&](const std::string& name) {
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (g.rules[r].name == name) return r;
    }
    ADD_FAILURE() << "no rule " << name << "\n" << GrammarToString(g);
    return size_t{0};
  };
  ByteSet a;
  for (char c : {'x', 'y', 'z'}) a.Add(c);
  EXPECT_EQ(follow[rule("a")], a) << GrammarToString(g);  // c ends with a: root's (none)
  // a's repetition is a rule it calls in tail position: it inherits a's FOLLOW.
  int tail_calls = 0;
  for (const auto& alt : g.rules[rule("a")].alternatives) {
    if (!alt.empty() && alt.back().rule >= 0) {
      EXPECT_EQ(follow[alt.back().rule], a) << g.rules[alt.back().rule].name;
      ++tail_calls;
    }
  }
  EXPECT_GT(tail_calls, 0) << GrammarToString(g);
  EXPECT_EQ(follow[rule("b")], ByteSet::Of('z'));
  EXPECT_TRUE(follow[rule("root")].Empty());
}

}  // namespace
}  // namespace lockstep::grammar

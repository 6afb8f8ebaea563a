// The position-table mask (FillTokenMask) equals the reference that walks every token
// through the parser (FillTokenMaskByWalk) at every step of sampled outputs, for random
// schemas, a regex, an EBNF grammar and json_object.
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

void ExpectMasksEqual(const GrammarSpec& spec, uint32_t seed) {
  auto vocab = MakeTestingVocabulary(1500, seed);
  auto compiled = Compile(spec, vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << spec.text;
  const CompiledGrammar& g = **compiled;
  FrameStore store;
  ParseState state = g.parser().Start(&store);
  std::vector<uint32_t> fast(MaskWords(*vocab)), walk(MaskWords(*vocab));
  std::mt19937 rng(seed);
  for (int step = 0; step < 200; ++step) {
    FillTokenMask(g, &store, state, absl::MakeSpan(fast));
    FillTokenMaskByWalk(g, &store, state, absl::MakeSpan(walk));
    for (int32_t t = 0; t < static_cast<int32_t>(vocab->token_bytes.size()); ++t) {
      ASSERT_EQ((fast[t >> 5] >> (t & 31)) & 1, (walk[t >> 5] >> (t & 31)) & 1)
          << "seed " << seed << " step " << step << " token " << t << " '" << vocab->token_bytes[t]
          << "'\n"
          << spec.text;
    }
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < static_cast<int32_t>(vocab->token_bytes.size()); ++t) {
      if (((walk[t >> 5] >> (t & 31)) & 1) && !g.IsStop(t)) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(g.parser().AdvanceAll(&store, vocab->token_bytes[t], &state));
  }
}

TEST(MaskEquivalenceTest, RandomSchemas) {
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    ExpectMasksEqual({GrammarSpec::Kind::kJsonSchema, RandomSchema(seed)}, seed);
  }
}

TEST(MaskEquivalenceTest, OtherKinds) {
  ExpectMasksEqual({GrammarSpec::Kind::kJsonObject, ""}, 3);
  ExpectMasksEqual({GrammarSpec::Kind::kRegex, "(\\w+ ){2,5}\\d{1,3}(, [a-z]+)*"}, 4);
  ExpectMasksEqual({GrammarSpec::Kind::kEbnf,
                    "root ::= call+\ncall ::= \"<tool_call>\" obj \"</tool_call>\" \"\\n\"?\n"
                    "obj ::= \"{\" ( \"\\\"\" [a-z]+ \"\\\": \" [0-9]+ ) ( \", \" obj )? \"}\"\n"},
                   5);
}

// Inside a string of bounded length, a token that stays inside the string is accepted by
// its position's table whatever the stack below; only tokens that may close the string
// (or run past its length) are left to the walk from the real stack. (Lowered as a chain
// of one-character rules, every token left the rule after its first byte, so the walk
// covered nearly the whole vocabulary at every step.)
TEST(MaskEquivalenceTest, BoundedStringTokensAreContextIndependent) {
  auto vocab = MakeTestingVocabulary(1500, 7);
  auto compiled = Compile({GrammarSpec::Kind::kJsonSchema, R"({"type":"string","maxLength":40})"},
                          vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CompiledGrammar& g = **compiled;
  FrameStore store;
  ParseState state = g.parser().Start(&store);
  ASSERT_TRUE(g.parser().AdvanceAll(&store, "\"ab", &state));
  size_t accepted = 0, dependent = 0;
  for (int32_t top : state.tops) {
    const PositionTable& table = g.Table(store.Get(top));
    accepted += table.num_accepted;
    dependent += table.dependent.token_ids().size();
  }
  EXPECT_GT(accepted, vocab->token_bytes.size() / 2);
  EXPECT_LT(dependent, vocab->token_bytes.size() / 5)
      << "accepted " << accepted << ", dependent " << dependent;
  ExpectMasksEqual({GrammarSpec::Kind::kJsonSchema, R"({"type":"string","maxLength":40})"}, 7);
}

}  // namespace
}  // namespace lockstep::grammar

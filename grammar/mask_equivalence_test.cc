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

}  // namespace
}  // namespace lockstep::grammar

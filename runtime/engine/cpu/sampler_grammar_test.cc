// SequenceGrammar and the grammar mask in the sampler: replay, rollback to a common
// prefix, the mask applied to the logits, drafts trimmed, dead ends.
#include "runtime/engine/cpu/sampler_grammar.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/sampler.h"

namespace lockstep::engine {
namespace {

using grammar::GrammarSpec;

constexpr int32_t kVocab = 260;
constexpr int32_t kEos = 257;

// Ids 0..255 are the bytes, 256..259 special (257 the stop token).
std::shared_ptr<const grammar::Vocabulary> ByteVocabulary() {
  auto v = std::make_shared<grammar::Vocabulary>();
  v->token_bytes.resize(kVocab);
  for (int b = 0; b < 256; ++b) v->token_bytes[b] = std::string(1, static_cast<char>(b));
  v->stop_tokens = {kEos};
  return v;
}

std::vector<int32_t> Ids(const std::string& text) { return {text.begin(), text.end()}; }

bool Allows(absl::Span<const uint32_t> mask, int32_t t) { return (mask[t / 32] >> (t % 32)) & 1u; }

TEST(SamplerGrammarTest, SyncReplaysRollsBackToTheCommonPrefixAndRefusesForeignTokens) {
  GrammarSource source(ByteVocabulary());
  const GrammarSpec spec{GrammarSpec::Kind::kRegex, "(ab|ac)+"};
  SequenceGrammar g;
  ASSERT_TRUE(g.Sync(source, spec, Ids("aba")).ok());
  absl::Span<const uint32_t> mask = g.Allowed();
  EXPECT_TRUE(Allows(mask, 'b'));
  EXPECT_TRUE(Allows(mask, 'c'));
  EXPECT_FALSE(Allows(mask, 'a'));
  EXPECT_FALSE(Allows(mask, kEos));
  // Another history with a shorter common prefix: the state is that of "ac".
  ASSERT_TRUE(g.Sync(source, spec, Ids("ac")).ok());
  EXPECT_EQ(g.num_accepted(), 2);
  mask = g.Allowed();
  EXPECT_TRUE(Allows(mask, 'a'));
  EXPECT_TRUE(Allows(mask, kEos));
  EXPECT_FALSE(Allows(mask, 'b'));
  // The same as a fresh matcher replaying "ac".
  SequenceGrammar fresh;
  ASSERT_TRUE(fresh.Sync(source, spec, Ids("ac")).ok());
  const std::vector<uint32_t> a(mask.begin(), mask.end());
  const absl::Span<const uint32_t> b = fresh.Allowed();
  EXPECT_EQ(a, std::vector<uint32_t>(b.begin(), b.end()));

  const absl::Status foreign = g.Sync(source, spec, Ids("abx"));
  EXPECT_EQ(foreign.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(foreign.message().find("generated token 2"), std::string::npos) << foreign;
}

TEST(SamplerGrammarTest, AllowedDraftsStopsAtTheFirstForbiddenTokenAndKeepsTheState) {
  GrammarSource source(ByteVocabulary());
  SequenceGrammar g;
  ASSERT_TRUE(g.Sync(source, {GrammarSpec::Kind::kRegex, "[0-9]+"}, Ids("1")).ok());
  EXPECT_EQ(g.AllowedDrafts(Ids("23x4")), 2);
  EXPECT_EQ(g.AllowedDrafts(Ids("x")), 0);
  EXPECT_EQ(g.num_accepted(), 1);
  EXPECT_TRUE(Allows(g.Allowed(), kEos));
}

TEST(SamplerGrammarTest, DeadEndAfterTheStopTokenAndBadSpecsAreErrors) {
  GrammarSource source(ByteVocabulary());
  SequenceGrammar g;
  ASSERT_TRUE(g.Sync(source, {GrammarSpec::Kind::kRegex, "ok"}, Ids("ok")).ok());
  absl::Span<const uint32_t> mask = g.Allowed();
  ASSERT_FALSE(mask.empty());
  EXPECT_TRUE(Allows(mask, kEos));
  ASSERT_TRUE(g.Accept(kEos).ok());
  EXPECT_TRUE(g.Allowed().empty());
  EXPECT_EQ(g.Accept('o').code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(GrammarDeadEnd(3).message().find("dead end after 3 generated tokens"),
            std::string::npos);

  SequenceGrammar bad;
  const absl::Status status = bad.Sync(source, {GrammarSpec::Kind::kRegex, "(ab"}, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  GrammarSource missing("/nonexistent-model-dir", kVocab, kEos);
  const absl::Status no_vocab = bad.Sync(missing, {GrammarSpec::Kind::kJsonObject, ""}, {});
  EXPECT_EQ(no_vocab.code(), absl::StatusCode::kFailedPrecondition) << no_vocab;
}

TEST(SamplerGrammarTest, SampleTokenDrawsOnlyAllowedTokensAndReportsNone) {
  GrammarSource source(ByteVocabulary());
  SequenceGrammar g;
  ASSERT_TRUE(g.Sync(source, {GrammarSpec::Kind::kRegex, "[xyz]"}, {}).ok());
  std::vector<float> logits(kVocab, 0.0f);
  logits['a'] = 50.0f;  // the model's favourite is forbidden
  logits['z'] = 1.0f;
  SamplingHistory history;
  history.allowed = g.Allowed();
  Arena arena;
  sched::SamplingParams greedy;
  EXPECT_EQ(SampleToken(logits.data(), kVocab, greedy, 0, arena, history), 'z');
  sched::SamplingParams sampled;
  sampled.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    sampled.seed = seed;
    const int32_t t = SampleToken(logits.data(), kVocab, sampled, 7, arena, history);
    EXPECT_TRUE(t == 'x' || t == 'y' || t == 'z') << "seed " << seed << " drew " << t;
  }
  // Every allowed token at -inf (min_tokens holding back EOS, the only one allowed).
  ASSERT_TRUE(g.Accept('x').ok());
  history.allowed = g.Allowed();
  sched::SamplingParams min_tokens;
  min_tokens.min_tokens = 5;
  history.eos_token_id = kEos;
  EXPECT_EQ(SampleToken(logits.data(), kVocab, min_tokens, 1, arena, history), -1);
}

}  // namespace
}  // namespace lockstep::engine

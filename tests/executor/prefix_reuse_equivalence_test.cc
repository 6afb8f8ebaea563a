// Prefix reuse changes nothing a client can see: through the real executor, KV manager
// and CPU engine (a tiny transformer and its draft model), multi-turn conversations that
// share a system prompt give the same tokens with reuse on as off, token for token,
// and the same drafts (every request's proposed and accepted counts), in every draft
// mode: none, paired and unpaired draft pools (one of them small, so its tree loses
// prefixes its target still has and the draft model prefills the gap), and the n-gram
// drafter. The audit holds after every step.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/executor/executor.h"
#include "spec_decode/speculative_config.h"
#include "tests/executor/outcome_sink.h"
#include "tests/executor/solo_executor.h"

namespace lockstep::exec {
namespace {

using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kTpb = 8;
constexpr int kK = 3;
constexpr int kConversations = 4;
constexpr int kTurns = 3;
constexpr int kMaxTokens = 10;

struct Mode {
  const char* name;
  kv::DraftMode draft_mode;
  spec::Method method;
  int32_t draft_blocks;
};

// One rank with the tiny model, `reuse` on or off; conversations of kTurns turns, each
// turn's prompt the previous prompt + its output + a new user message, turn by turn
// (wave t submits turn t of every conversation, plus a duplicate of conversation 0's;
// two long unrelated requests follow each turn).
RunOutcomes RunConversations(const Mode& mode, bool reuse, uint64_t seed) {
  const std::string dir = PresetModelDir("tiny");
  const bool draft_model = mode.method == spec::Method::kDraftModel;
  ExecutorConfig config;
  config.instance = "reuse";
  config.audit_every_step = true;
  config.scheduler.max_batch_size = 8;
  config.scheduler.max_num_active_requests = 6;
  config.scheduler.max_num_tokens = 512;
  config.scheduler.chunk_size = 48;
  config.scheduler.prefix_reuse = reuse;
  if (mode.method != spec::Method::kNone) {
    config.scheduler.speculative = {.method = mode.method, .num_draft_tokens = kK};
  }
  config.kv.target.layout = *engine::ModelBlockLayout(dir, kTpb);
  config.kv.target.num_blocks = 512;
  config.kv.target.enable_prefix_reuse = reuse;
  config.kv.draft_mode = mode.draft_mode;
  if (draft_model) {
    config.kv.draft.layout = *engine::ModelBlockLayout(dir + "/draft", kTpb);
    config.kv.draft.num_blocks = mode.draft_blocks;
    config.kv.draft.enable_prefix_reuse = reuse;
    config.kv.draft.reuse_salt = 7;
  }
  config.kv.dummy_reserved_tokens = 1 + config.scheduler.speculative.num_draft_tokens;
  OutcomeSink sink;
  SoloExecutor rank = MakeSoloExecutor(config, dir, &sink);

  std::mt19937_64 rng(seed);
  std::vector<int32_t> system = {engine::kByteBosToken};
  for (int32_t t : RandomBytes(rng, 45)) system.push_back(t);
  std::vector<std::vector<int32_t>> history(kConversations, system);
  std::vector<RequestId> order;
  auto run_wave = [&](std::vector<NewRequestSpec> specs) {
    for (NewRequestSpec& s : specs) s.sampling = {.max_tokens = kMaxTokens, .ignore_eos = true};
    return RunWave(*rank.executor, sink, std::move(specs), 5000,
                   absl::StrCat(mode.name, " reuse ", reuse), order);
  };
  for (int turn = 0; turn < kTurns; ++turn) {
    // Turn `turn` of every conversation, and a duplicate of conversation 0's, at once.
    std::vector<NewRequestSpec> specs(kConversations + 1);
    for (int c = 0; c < kConversations; ++c) {
      for (int32_t t : RandomBytes(rng, 5 + static_cast<int>(rng() % 12))) {
        history[c].push_back(t);
      }
      specs[c].prompt = history[c];
    }
    specs[kConversations].prompt = history[0];
    const std::vector<RequestId> wave = run_wave(std::move(specs));
    for (int c = 0; c < kConversations; ++c) {
      const std::vector<int32_t>& out = sink.outcomes[wave[c]].tokens;
      history[c].insert(history[c].end(), out.begin(), out.end());
    }
    // Two long unrelated prompts: with a small draft pool their mirrors evict the LRU
    // front of the draft tree, the tails of some conversations, which the target tree
    // keeps (its pool is large): the next turn's mirrors reuse less than their targets.
    std::vector<NewRequestSpec> noise(2);
    for (NewRequestSpec& s : noise) s.prompt = RandomBytes(rng, 300);
    run_wave(std::move(noise));
  }
  return CollectOutcomes(*rank.executor, sink, order);
}

class PrefixReuseEquivalenceTest : public ::testing::TestWithParam<Mode> {};

TEST_P(PrefixReuseEquivalenceTest, ReuseOnEqualsReuseOffTokenForTokenAndDraftForDraft) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const Mode& mode = GetParam();
  const RunOutcomes off = RunConversations(mode, false, seed);
  const RunOutcomes on = RunConversations(mode, true, seed);
  ASSERT_EQ(off.outcomes.size(), static_cast<size_t>(kTurns * (kConversations + 3)));
  ASSERT_EQ(on.outcomes.size(), off.outcomes.size());
  for (size_t i = 0; i < on.outcomes.size(); ++i) {
    EXPECT_THAT(on.outcomes[i].status, IsOk()) << "request " << i;
    ASSERT_EQ(on.outcomes[i].tokens.size(), static_cast<size_t>(kMaxTokens)) << "request " << i;
    EXPECT_EQ(on.outcomes[i].tokens, off.outcomes[i].tokens) << "request " << i;
    EXPECT_EQ(on.outcomes[i].proposed, off.outcomes[i].proposed) << "request " << i;
    EXPECT_EQ(on.outcomes[i].accepted, off.outcomes[i].accepted) << "request " << i;
  }
  // Nothing paused (a recompute may draft differently) and nothing failed.
  for (const RunOutcomes* r : {&off, &on}) {
    EXPECT_EQ(r->counters.paused, 0);
    EXPECT_EQ(r->counters.engine_failures, 0);
    EXPECT_EQ(r->counters.audit_violations, 0);
  }
  EXPECT_EQ(off.counters.reused_tokens, 0);
  EXPECT_GT(on.counters.reused_tokens, on.counters.context_tokens / 5)
      << "follow-up turns reuse the earlier turns' prompts";
  EXPECT_EQ(on.kv.reused_tokens, on.counters.reused_tokens);
  if (mode.method != spec::Method::kNone) {
    EXPECT_GT(on.counters.drafts_accepted, 0);
  }
  if (mode.draft_mode == kv::DraftMode::kUnpaired) {
    EXPECT_GT(on.kv.mirror_reused_tokens, 0);
    if (mode.draft_blocks < 100) {
      // The small draft pool lost prefixes its target kept: some mirrors reused less,
      // and the draft model prefilled the gap (or the drafts above would differ).
      EXPECT_LT(on.kv.mirror_reused_tokens, on.kv.reused_tokens);
      EXPECT_GT(on.kv.evicted_blocks, 0);
    }
  }
  std::printf("%s: %lld of %lld prefill tokens reused, mirrors %lld, drafts %lld/%lld\n", mode.name,
              static_cast<long long>(on.counters.reused_tokens),
              static_cast<long long>(on.counters.context_tokens),
              static_cast<long long>(on.kv.mirror_reused_tokens),
              static_cast<long long>(on.counters.drafts_accepted),
              static_cast<long long>(on.counters.drafts_proposed));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PrefixReuseEquivalenceTest,
    ::testing::Values(Mode{"none", kv::DraftMode::kNone, spec::Method::kNone, 0},
                      Mode{"paired", kv::DraftMode::kPaired, spec::Method::kDraftModel, 512},
                      Mode{"unpaired", kv::DraftMode::kUnpaired, spec::Method::kDraftModel, 512},
                      Mode{"unpaired_small_pool", kv::DraftMode::kUnpaired,
                           spec::Method::kDraftModel, 96},
                      Mode{"ngram", kv::DraftMode::kNone, spec::Method::kNgram, 0}),
    [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep::exec

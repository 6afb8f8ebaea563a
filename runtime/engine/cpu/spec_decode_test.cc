// Speculative decoding end to end through the CPU engine: greedy (and stochastic)
// output with a draft model equals output without one, token for token; and the
// disaggregation equivalence (KV copied block by block into another engine's pools).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model_engine.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RunSpec;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::SpecRunOutput;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// A run with the draft model and K drafts (none for K = 0).
SpecRunOutput Generate(const std::string& dir, int k, const std::vector<HostRequest>& requests,
                       bool overlap, uint64_t seed) {
  return RunSpec(dir, {k > 0 ? spec::Method::kDraftModel : spec::Method::kNone, k, false, overlap},
                 requests, seed);
}

TEST(SpecDecodeTest, GreedyWithSpeculationEqualsWithout) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  for (const char* preset : {"tiny", "tiny-moe"}) {
    const std::string dir = PresetModelDir(preset);
    const std::vector<HostRequest> requests =
        SpecPrompts(preset == std::string("tiny") ? 100 : 30, seed, 24, false);
    const SpecRunOutput plain = Generate(dir, 0, requests, false, seed);
    for (int k = 1; k <= 4; ++k) {
      const SpecRunOutput spec = Generate(dir, k, requests, /*overlap=*/k % 2 == 0, seed + k);
      for (size_t r = 0; r < requests.size(); ++r) {
        ASSERT_EQ(spec.tokens[r], plain.tokens[r]) << preset << " K=" << k << " request " << r;
      }
      const double rate = static_cast<double>(spec.accepted) / static_cast<double>(spec.proposed);
      std::printf("%s K=%d: greedy draft acceptance %.3f (%lld of %lld proposed)\n", preset, k,
                  rate, static_cast<long long>(spec.accepted),
                  static_cast<long long>(spec.proposed));
      EXPECT_GT(rate, 0.0) << preset << " K=" << k;
      EXPECT_LT(rate, 1.0) << preset << " K=" << k;
    }
  }
}

// Verification samples each position with the request's own draw and accepts a draft
// iff it equals that sample, so stochastic output does not depend on speculation.
TEST(SpecDecodeTest, StochasticWithSpeculationEqualsWithout) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests = SpecPrompts(24, seed + 1, 20, true);
  const SpecRunOutput plain = Generate(dir, 0, requests, false, seed);
  const SpecRunOutput spec = Generate(dir, 3, requests, true, seed + 5);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.accepted, 0);
  std::printf("tiny K=3 stochastic (T=1, top_k=40): acceptance %.3f\n",
              static_cast<double>(spec.accepted) / static_cast<double>(spec.proposed));
}

// Context on one engine, then the KV blocks (target and draft) copied into another
// engine's pools under other block ids, decoding there from a seed: the tokens equal
// continuous decoding on one engine.
TEST(SpecDecodeTest, DisaggregatedDecodeEqualsContinuous) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny-moe");
  const int max_tokens = 16;
  for (int k : {0, 3}) {
    const std::vector<HostRequest> requests = SpecPrompts(6, seed + k, max_tokens, k == 3);
    const SpecRunOutput continuous = Generate(dir, k, requests, false, seed);
    const std::string draft_dir = k > 0 ? JoinPath(dir, "draft") : "";
    TestEngine context = MakeTestEngine({.model_dir = dir,
                                         .draft_dir = draft_dir,
                                         .num_draft_tokens = k,
                                         .tokens_per_block = 4,
                                         .pool_seed = seed});
    TestEngine generation = MakeTestEngine({.model_dir = dir,
                                            .draft_dir = draft_dir,
                                            .num_draft_tokens = k,
                                            .tokens_per_block = 4,
                                            .pool_seed = seed + 99});
    int64_t step = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      const HostRequest& request = requests[r];
      const int64_t prompt = static_cast<int64_t>(request.prompt.size());
      // Prefill on the context engine in one chunk.
      std::vector<BlockId> blocks, draft_blocks;
      ASSERT_THAT(context.target->Cover(blocks, prompt), IsOk());
      if (k > 0) {
        ASSERT_THAT(context.draft->Cover(draft_blocks, prompt + k), IsOk());
      }
      Batch batch;
      batch.step = StepId(step);
      ContextChunk& chunk = batch.context.emplace_back();
      chunk.kv = kv::BlockRefs{RequestId(request.id), 1, blocks, k > 0 ? 2u : 0u, draft_blocks};
      chunk.tokens = request.prompt;
      chunk.last_chunk = true;
      chunk.sampling = request.sampling;
      chunk.num_draft_tokens = k;
      context.engine->Launch(batch);
      absl::StatusOr<BatchResult> first =
          context.engine->Collect(StepId(step++), absl::Seconds(30));
      ASSERT_THAT(first, IsOk());
      ASSERT_EQ(first->sequences[0].tokens.size(), 1u);
      ASSERT_EQ(first->sequences[0].next_drafts.size(), static_cast<size_t>(k));

      // Transfer: copy whole blocks holding [0, prompt) into freshly allocated blocks.
      auto transfer = [&](HostPool& from, HostPool& to, const std::vector<BlockId>& src) {
        std::vector<BlockId> dst;
        LOCKSTEP_CHECK_OK(to.Cover(dst, prompt));
        for (size_t b = 0; b < dst.size(); ++b) {
          const size_t floats = from.layout().BlockElements();
          std::memcpy(to.storage() + dst[b].value() * floats,
                      from.storage() + src[b].value() * floats, floats * sizeof(float));
        }
        return dst;
      };
      std::vector<BlockId> gen_blocks = transfer(*context.target, *generation.target, blocks);
      std::vector<BlockId> gen_draft =
          k > 0 ? transfer(*context.draft, *generation.draft, draft_blocks)
                : std::vector<BlockId>{};
      // Decode on the generation engine: seeded first step, then its own state.
      std::vector<int32_t> tokens = first->sequences[0].tokens;
      int64_t history = prompt;
      for (int s = 0; static_cast<int>(tokens.size()) < max_tokens; ++s) {
        ASSERT_THAT(generation.target->Cover(gen_blocks, history + 1 + k), IsOk());
        if (k > 0) {
          ASSERT_THAT(generation.draft->Cover(gen_draft, history + 1 + k), IsOk());
        }
        Batch gen;
        gen.step = StepId(step);
        GenerationStep& g = gen.generation.emplace_back();
        g.kv = kv::BlockRefs{RequestId(request.id), 7, gen_blocks, k > 0 ? 8u : 0u, gen_draft};
        if (s == 0) g.seed = SequenceSeed{prompt, tokens[0], first->sequences[0].next_drafts};
        g.num_draft_tokens = k;
        g.sampling = request.sampling;
        generation.engine->Launch(gen);
        absl::StatusOr<BatchResult> out =
            generation.engine->Collect(StepId(step++), absl::Seconds(30));
        ASSERT_THAT(out, IsOk());
        for (int32_t t : out->sequences[0].tokens) {
          if (static_cast<int>(tokens.size()) < max_tokens) tokens.push_back(t);
        }
        history += static_cast<int64_t>(out->sequences[0].tokens.size());
      }
      EXPECT_EQ(tokens, continuous.tokens[r]) << "K=" << k << " request " << r;
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

// A reused target prefix whose draft KV is missing (an unpaired draft mirror that
// reused less than its target): the context chunk carries the missing tokens as its
// draft prefix and the draft model prefills them first, so the draft KV, the first
// token and the first drafts are bitwise what a full prefill computes.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

constexpr int kTpb = 8;
constexpr int kK = 3;

absl::StatusOr<BatchResult> RunBatch(ModelEngine& engine, Batch batch) {
  const StepId step = batch.step;
  engine.Launch(std::move(batch));
  return engine.Collect(step, absl::Seconds(30));
}

std::vector<BlockId> Blocks(HostPool& pool, int64_t tokens) {
  std::vector<BlockId> blocks;
  EXPECT_THAT(pool.Cover(blocks, tokens), IsOk());
  return blocks;
}

// The whole block's K and V, every layer.
std::vector<float> BlockData(HostPool& pool, BlockId block) {
  const size_t n = pool.layout().BlockElements();
  const float* at = pool.storage() + static_cast<size_t>(block.value()) * n;
  return std::vector<float>(at, at + n);
}

TEST(DraftPrefixTest, TheDraftPrefillsItsPrefixAndMatchesAFullPrefill) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  TestEngine engine = MakeTestEngine({.model_dir = dir,
                                      .draft_dir = dir + "/draft",
                                      .num_draft_tokens = kK,
                                      .tokens_per_block = kTpb,
                                      .pool_seed = seed});
  std::mt19937_64 rng(seed);
  std::vector<int32_t> prompt = {kByteBosToken};
  while (prompt.size() < 29) prompt.push_back(static_cast<int32_t>(rng() % 256));
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t reused = 2 * kTpb;

  // A: the whole prompt in one chunk, both pools from position 0.
  ContextChunk a;
  a.kv = {RequestId(1), 1, Blocks(*engine.target, n + kK), 2, Blocks(*engine.draft, n + kK)};
  a.tokens = prompt;
  a.last_chunk = true;
  a.num_draft_tokens = kK;
  Batch first;
  first.step = StepId(0);
  first.context.push_back(a);
  absl::StatusOr<BatchResult> full = RunBatch(*engine.engine, first);
  ASSERT_THAT(full, IsOk());

  // B: A's first two target blocks (its reused prefix), fresh draft blocks.
  ContextChunk b;
  b.kv = {RequestId(2), 3, {a.kv.blocks[0], a.kv.blocks[1]}, 4, Blocks(*engine.draft, n + kK)};
  ASSERT_THAT(engine.target->Cover(b.kv.blocks, n + kK), IsOk());
  b.tokens.assign(prompt.begin() + reused, prompt.end());
  b.position = reused;
  b.draft_prefix.assign(prompt.begin(), prompt.begin() + reused);
  b.last_chunk = true;
  b.num_draft_tokens = kK;
  Batch second;
  second.step = StepId(1);
  second.context.push_back(b);
  absl::StatusOr<BatchResult> resumed = RunBatch(*engine.engine, second);
  ASSERT_THAT(resumed, IsOk());

  EXPECT_EQ(resumed->sequences[0].tokens, full->sequences[0].tokens);
  EXPECT_EQ(resumed->sequences[0].next_drafts, full->sequences[0].next_drafts);
  ASSERT_EQ(full->sequences[0].next_drafts.size(), static_cast<size_t>(kK));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(BlockData(*engine.draft, b.kv.draft_blocks[i]),
              BlockData(*engine.draft, a.kv.draft_blocks[i]))
        << "draft KV of the prefix, block " << i;
  }

  // A draft prefix reaching before position 0 is refused, naming the request.
  b.kv.id = RequestId(3);
  b.draft_prefix.push_back(1);
  Batch bad;
  bad.step = StepId(2);
  bad.context.push_back(b);
  absl::StatusOr<BatchResult> refused = RunBatch(*engine.engine, bad);
  ASSERT_THAT(refused, IsOk());
  ASSERT_EQ(refused->sequences.size(), 1u);
  EXPECT_THAT(refused->sequences[0].status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request 3 (cache generation 3): a draft prefix of 17 tokens")));
}

}  // namespace
}  // namespace lockstep::engine

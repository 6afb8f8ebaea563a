#include "runtime/engine/fake/fake_engine.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

FakeEngineOptions Options(bool threaded) {
  FakeEngineOptions o;
  o.threaded = threaded;
  o.tokens_per_block = 4;
  o.target_num_blocks = 16;
  o.draft_num_blocks = 16;
  o.draft_acceptance = 0.5;
  return o;
}

kv::BlockRefs Ref(int64_t id, std::vector<int32_t> blocks, bool draft = false) {
  kv::BlockRefs r;
  r.id = RequestId(id);
  r.generation = static_cast<uint64_t>(id);
  for (int32_t b : blocks) r.blocks.push_back(BlockId(b));
  if (draft) {
    r.draft_generation = 100 + static_cast<uint64_t>(id);
    for (int32_t b : blocks) r.draft_blocks.push_back(BlockId(b));
  }
  return r;
}

TEST(FakeEngineTest, TokensFollowTheTokenFunctionThroughContextAndDecode) {
  for (bool threaded : {false, true}) {
    FakeEngine e(Options(threaded));
    Batch b;
    b.step = StepId(0);
    ContextChunk c;
    c.kv = Ref(1, {0, 1});
    c.tokens = {9, 9, 9, 9, 9};
    c.last_chunk = true;
    c.sampling.seed = 5;
    b.context.push_back(c);
    e.Launch(b);
    absl::StatusOr<BatchResult> r = e.Collect(StepId(0), absl::Seconds(5));
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->sequences[0].tokens, std::vector<int32_t>{e.TargetToken(5, 5)});
    Batch g;
    g.step = StepId(1);
    GenerationStep step;
    step.kv = Ref(1, {0, 1});
    step.sampling.seed = 5;
    g.generation.push_back(step);
    e.Launch(g);
    r = e.Collect(StepId(1), absl::Seconds(5));
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->sequences[0].tokens, std::vector<int32_t>{e.TargetToken(5, 6)});
  }
}

TEST(FakeEngineTest, ABlockTableThatDoesNotCoverTheWriteFailsTheBatch) {
  FakeEngine e(Options(false));
  Batch b;
  b.step = StepId(0);
  ContextChunk c;
  c.kv = Ref(1, {0});  // 4 tokens of capacity for a 5-token chunk
  c.tokens = {1, 2, 3, 4, 5};
  b.context.push_back(c);
  e.Launch(b);
  EXPECT_THAT(e.Collect(StepId(0), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("covers 4")));
}

TEST(FakeEngineTest, TwoSequencesWritingOneBlockFailTheBatch) {
  FakeEngine e(Options(false));
  Batch b;
  b.step = StepId(0);
  for (int id : {1, 2}) {
    ContextChunk c;
    c.kv = Ref(id, {3});
    c.tokens = {1, 2};
    b.context.push_back(c);
  }
  e.Launch(b);
  EXPECT_THAT(e.Collect(StepId(0), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("written by requests 1 and 2")));
}

TEST(FakeEngineTest, DraftsAgreeAtTheConfiguredRate) {
  FakeEngineOptions o = Options(false);
  o.draft_acceptance = 0.3;
  FakeEngine e(o);
  int agree = 0;
  for (int p = 0; p < 10000; ++p) agree += e.DraftToken(1, p) == e.TargetToken(1, p);
  EXPECT_NEAR(agree / 10000.0, 0.3, 0.03);
}

TEST(FakeEngineTest, TheTrackerHoldsABatchsBlocksUntilCollected) {
  BlockWriteTracker tracker;
  FakeEngineOptions o = Options(false);
  o.tracker = &tracker;
  FakeEngine e(o);
  Batch b;
  b.step = StepId(3);
  ContextChunk c;
  c.kv = Ref(1, {6}, /*draft=*/true);
  c.tokens = {1};
  b.context.push_back(c);
  e.Launch(b);
  EXPECT_EQ(tracker.Holder(0, 6), std::optional<int64_t>(3));
  EXPECT_EQ(tracker.Holder(1, 6), std::optional<int64_t>(3));
  ASSERT_THAT(e.Collect(StepId(3), absl::Seconds(5)), IsOk());
  EXPECT_EQ(tracker.Holder(0, 6), std::nullopt);
}

absl::Status RunOne(FakeEngine& e, Batch b) {
  const StepId step = b.step;
  e.Launch(std::move(b));
  return e.Collect(step, absl::Seconds(5)).status();
}

ContextChunk Chunk(kv::BlockRefs kv, std::vector<int32_t> tokens, int64_t position) {
  ContextChunk c;
  c.kv = std::move(kv);
  c.tokens = std::move(tokens);
  c.position = position;
  return c;
}

// B reuses A's first target block (tokens 0..3) but gets fresh draft blocks: its draft
// must prefill those tokens first (the draft prefix), or the batch fails.
TEST(FakeEngineTest, AReusedPrefixWithoutItsDraftKvFailsTheBatch) {
  FakeEngine e(Options(false));
  const std::vector<int32_t> prompt = {7, 8, 9, 10, 11, 12, 13, 14};
  Batch a;
  a.step = StepId(0);
  a.context.push_back(Chunk(Ref(1, {0, 1}, /*draft=*/true), prompt, 0));
  ASSERT_THAT(RunOne(e, a), IsOk());

  kv::BlockRefs b = Ref(2, {0, 2});
  b.draft_generation = 7;
  b.draft_blocks = {BlockId(5), BlockId(6)};
  Batch missing;
  missing.step = StepId(1);
  missing.context.push_back(Chunk(b, {11, 12, 13, 14}, 4));
  EXPECT_THAT(RunOne(e, missing), StatusIs(absl::StatusCode::kInternal,
                                           HasSubstr("does not hold the tokens its target")));
  Batch with_prefix;
  with_prefix.step = StepId(2);
  with_prefix.context.push_back(Chunk(b, {11, 12, 13, 14}, 4));
  with_prefix.context[0].draft_prefix = {7, 8, 9, 10};
  EXPECT_THAT(RunOne(e, with_prefix), IsOk());
  // A draft prefix longer than the positions before the chunk is refused.
  with_prefix.step = StepId(3);
  with_prefix.context[0].draft_prefix = {1, 2, 3, 4, 5};
  EXPECT_THAT(RunOne(e, with_prefix),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("before position 4")));
  // The same prefix with a wrong token is not the target's chain.
  with_prefix.step = StepId(4);
  with_prefix.context[0].draft_prefix = {7, 8, 9, 99};
  EXPECT_THAT(RunOne(e, with_prefix), StatusIs(absl::StatusCode::kInternal));
}

TEST(FakeEngineTest, AGenerationStepFindsTheKvItsSequenceLeft) {
  FakeEngine e(Options(false));
  Batch a;
  a.step = StepId(0);
  a.context.push_back(Chunk(Ref(1, {0, 1}), {1, 2, 3, 4, 5}, 0));
  a.context[0].last_chunk = true;
  ASSERT_THAT(RunOne(e, a), IsOk());
  GenerationStep step;
  step.kv = Ref(1, {0, 1});
  Batch g;
  g.step = StepId(1);
  g.generation.push_back(step);
  ASSERT_THAT(RunOne(e, g), IsOk());
  // Another sequence writes request 1's second block between its steps.
  Batch other;
  other.step = StepId(2);
  other.context.push_back(Chunk(Ref(2, {1}), {9, 9}, 0));
  ASSERT_THAT(RunOne(e, other), IsOk());
  g.step = StepId(3);
  EXPECT_THAT(RunOne(e, g),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not what its previous step left")));
}

}  // namespace
}  // namespace lockstep::engine

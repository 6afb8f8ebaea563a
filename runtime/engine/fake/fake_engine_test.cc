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

}  // namespace
}  // namespace lockstep::engine

// Prefix reuse in the scheduler with every draft pool: a new context cache reuses its
// committed prefix; a paired draft with it; an unpaired mirror its own prefix, and the
// chunk marks where the draft model has to start (draft_position) with a mirror sized
// to cover it. A vetoed first chunk gives everything back.
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/prefix_hash.h"
#include "scheduler/scheduler.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int kTpb = 4;
constexpr int kK = 2;

class ReuseHarness {
 public:
  ReuseHarness(kv::DraftMode mode, int32_t draft_blocks, bool reuse = true) {
    SchedulerConfig config;
    config.max_batch_size = 4;
    config.max_num_tokens = 256;
    config.chunk_size = 256;
    config.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = kK};
    config.prefix_reuse = reuse;
    kv::KvManagerConfig kc;
    kc.target.layout = {1, 1, 1, kTpb};
    kc.target.num_blocks = 64;
    kc.target.enable_prefix_reuse = reuse;
    kc.draft_mode = mode;
    kc.draft = kc.target;
    kc.draft.num_blocks = draft_blocks;
    kv_ = *kv::KvManager::Create(kc);
    scheduler_ = std::make_unique<Scheduler>(config, kv_.get());
  }

  Request* Add(int64_t id, std::vector<int32_t> prompt) {
    SamplingParams p;
    p.max_tokens = 4;
    requests_.push_back(std::make_unique<Request>(RequestId(id), RequestType::kAggregated,
                                                  std::move(prompt), p, absl::UnixEpoch()));
    return requests_.back().get();
  }

  // Schedules one pass over `active`; `forward`: the chunks' KV is computed (history
  // moves in every pool, as the executor's completion does) and committed.
  ScheduleDecision Step(std::vector<Request*> active, bool forward = true) {
    Rollback rollback;
    ScheduleDecision d = scheduler_->Schedule(active, /*in_flight=*/false, &rollback);
    if (!forward) {
      rollback.Undo(*kv_);
      return d;
    }
    rollback.Commit();
    for (const ScheduledChunk& c : d.context) {
      const RequestId id = c.request->id();
      const int64_t end = c.position + c.num_tokens;
      EXPECT_THAT(kv_->Resize(id, kv::PoolKind::kTarget, std::nullopt, end), IsOk());
      if (kv_->config().draft_mode == kv::DraftMode::kUnpaired) {
        EXPECT_THAT(kv_->Resize(id, kv::PoolKind::kDraft, std::nullopt, end), IsOk());
      }
      EXPECT_THAT(kv_->Commit(id, c.request->context_tokens()), IsOk());
      c.request->set_context_position(end);
    }
    return d;
  }

  kv::KvManager& kv() { return *kv_; }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Request>> requests_;
};

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(100 + i);
  return p;
}

TEST(SchedulerReuseTest, EveryDraftModeReusesTheCommittedPrefix) {
  for (const kv::DraftMode mode :
       {kv::DraftMode::kNone, kv::DraftMode::kPaired, kv::DraftMode::kUnpaired}) {
    SCOPED_TRACE(kv::DraftModeName(mode));
    ReuseHarness h(mode, 64);
    Request* a = h.Add(1, Prompt(21));
    ScheduleDecision d = h.Step({a});
    ASSERT_THAT(d.context, SizeIs(1));
    EXPECT_EQ(d.context[0].position, 0);
    EXPECT_TRUE(d.context[0].new_cache);
    EXPECT_EQ(d.context[0].draft_gap(), 0);

    Request* b = h.Add(2, Prompt(21));
    d = h.Step({b});
    ASSERT_THAT(d.context, SizeIs(1));
    EXPECT_EQ(d.context[0].position, 20);  // 5 full blocks; the last token is computed
    EXPECT_EQ(d.context[0].num_tokens, 1);
    EXPECT_EQ(d.context[0].draft_gap(), 0);  // the draft prefix was reused with it
    if (mode != kv::DraftMode::kNone) {
      EXPECT_EQ(h.kv().Info(b->id(), kv::PoolKind::kDraft)->committed, 21 / kTpb * kTpb);
    }
    EXPECT_THAT(h.kv().Audit({a->id(), b->id()}, {}, false), IsEmpty());
  }
}

// The draft pool evicted the deepest two blocks of the prefix: the mirror reuses three,
// and the draft model prefills positions [12, 20) before the chunk.
TEST(SchedulerReuseTest, AMirrorThatReusedLessMarksTheDraftGap) {
  ReuseHarness h(kv::DraftMode::kUnpaired, 8);
  Request* a = h.Add(1, Prompt(21));
  h.Step({a});
  h.kv().Release(a->id());
  // Two more draft blocks than are free: the LRU front (the chain's leaves) goes.
  ASSERT_THAT(h.kv().CreateCache(RequestId(9)), IsOk());
  ASSERT_THAT(h.kv().AdmitMirror(RequestId(9)), IsOk());
  ASSERT_THAT(h.kv().Resize(RequestId(9), kv::PoolKind::kDraft, 20, 0), IsOk());
  h.kv().Release(RequestId(9));

  Request* b = h.Add(2, Prompt(21));
  ScheduleDecision d = h.Step({b}, /*forward=*/false);
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].position, 20);
  EXPECT_EQ(d.context[0].draft_position, 12);
  EXPECT_EQ(d.context[0].draft_gap(), 8);
  EXPECT_TRUE(d.context[0].new_cache);
  // Vetoed: both caches are gone, the reused blocks are back in the trees.
  EXPECT_FALSE(h.kv().Has(b->id(), kv::PoolKind::kTarget));
  EXPECT_FALSE(h.kv().Has(b->id(), kv::PoolKind::kDraft));
  EXPECT_EQ(h.kv().Stats().draft->cached_blocks, 3);
  EXPECT_EQ(h.kv().Stats().draft->used_blocks, 0);

  // Scheduled again: the mirror covers the gap, the chunk and the K drafts.
  Rollback rollback;
  d = h.scheduler().Schedule({b}, /*in_flight=*/false, &rollback);
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].draft_position, 12);
  const kv::CacheInfo mirror = *h.kv().Info(b->id(), kv::PoolKind::kDraft);
  EXPECT_EQ(mirror.history, 12);
  EXPECT_EQ(mirror.capacity, 20 + 1 + kK);
  EXPECT_EQ(h.kv().Info(b->id(), kv::PoolKind::kTarget)->capacity, 21);
  EXPECT_THAT(h.kv().Audit({b->id()}, {}, false), IsEmpty());
  rollback.Undo(h.kv());
}

TEST(SchedulerReuseTest, ReuseOffReusesNothingInAnyPool) {
  ReuseHarness h(kv::DraftMode::kUnpaired, 64, /*reuse=*/false);
  Request* a = h.Add(1, Prompt(21));
  h.Step({a});
  Request* b = h.Add(2, Prompt(21));
  const ScheduleDecision d = h.Step({b});
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].position, 0);
  EXPECT_EQ(d.context[0].draft_gap(), 0);
  EXPECT_EQ(h.kv().Stats().mirror_reused_tokens, 0);
}

// Admission hashes a request's context once into its prefix keys (the probe, the
// device tree's match and the tiers' fetch read them), and extends them when a pause
// makes the context grow.
TEST(SchedulerReuseTest, AdmissionKeepsTheContextsPrefixKeysWithTheRequest) {
  ReuseHarness h(kv::DraftMode::kNone, 64);
  Request* a = h.Add(1, Prompt(21));
  h.Step({a});
  auto keys = [](const Request& r) {
    return std::vector<uint64_t>(r.prefix_keys().keys().begin(), r.prefix_keys().keys().end());
  };
  EXPECT_EQ(keys(*a), kv::PrefixHashChain(0, kTpb, a->context_tokens()));
  EXPECT_EQ(a->prefix_keys().num_tokens(), 21);

  a->TransitionTo(RequestState::kGenerationInProgress);
  ASSERT_EQ(a->AppendTokens({7, 8, 9, 10}, /*eos_token_id=*/-1).num_appended, 4);
  h.kv().Release(a->id());
  a->ResetForRecompute();
  const ScheduleDecision d = h.Step({a});
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].position, 20);  // its committed prompt blocks
  EXPECT_EQ(a->prefix_keys().num_tokens(), 25);
  EXPECT_EQ(keys(*a), kv::PrefixHashChain(0, kTpb, a->context_tokens()));
  EXPECT_THAT(h.kv().Audit({a->id()}, {}, false), IsEmpty());
}

}  // namespace
}  // namespace lockstep::sched

#include "scheduler/scheduler.h"

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A rank's requests plus a KV manager, stepped like the executor would: schedule, then
// commit (apply context progress and a step's KV use) or roll back.
class Harness {
 public:
  Harness(SchedulerConfig config, int num_blocks, kv::DraftMode draft = kv::DraftMode::kNone,
          int tokens_per_block = 4) {
    kv::KvManagerConfig kc;
    kc.target.layout = {1, 1, 1, tokens_per_block};
    kc.target.num_blocks = num_blocks;
    kc.target.enable_prefix_reuse = config.prefix_reuse;
    kc.draft_mode = draft;
    kc.draft = kc.target;
    kv_ = *kv::KvManager::Create(kc);
    scheduler_ = std::make_unique<Scheduler>(config, kv_.get());
  }

  Request* Add(int64_t id, int prompt, int max_tokens,
               RequestType type = RequestType::kAggregated) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < prompt; ++i) tokens.push_back((id * 7 + i) % 200);
    SamplingParams p;
    p.max_tokens = max_tokens;
    requests_.push_back(std::make_unique<Request>(RequestId(id), type, tokens, p, absl::UnixEpoch(),
                                                  scheduler_->config().speculative));
    return requests_.back().get();
  }

  std::vector<Request*> Active() const {
    std::vector<Request*> out;
    for (const auto& r : requests_) {
      if (!r->finished()) out.push_back(r.get());
    }
    return out;
  }

  // One pass; with `commit`, applies the step as if its forward ran: context chunks
  // advance and become history, generation steps use 1 token (no drafts accepted) and
  // return the rest of their target grant.
  ScheduleDecision Step(bool commit = true) {
    Rollback rollback;
    ScheduleDecision d = scheduler_->Schedule(Active(), /*in_flight=*/false, &rollback);
    if (!commit) {
      rollback.Undo(*kv_);
      return d;
    }
    rollback.Commit();
    for (const ScheduledChunk& c : d.context) {
      c.request->set_context_position(c.position + c.num_tokens);
      EXPECT_THAT(kv_->Resize(c.request->id(), kv::PoolKind::kTarget, std::nullopt,
                              c.position + c.num_tokens),
                  testing::IsOk());
      if (c.last_chunk) c.request->TransitionTo(RequestState::kGenerationInProgress);
    }
    for (size_t i = 0; i < d.generation.size(); ++i) {
      Request* r = d.generation[i];
      const int k = d.generation_grants[i].num_draft_tokens;
      const auto info = *kv_->Info(r->id(), kv::PoolKind::kTarget);
      EXPECT_THAT(kv_->Resize(r->id(), kv::PoolKind::kTarget, info.capacity - k, info.history + 1),
                  testing::IsOk());
      if (r->AppendTokens({1}, -1).finished) {
        r->Finish(r->finish_reason(), absl::OkStatus(), absl::UnixEpoch());
        kv_->Release(r->id());
      }
    }
    return d;
  }

  std::vector<std::string> Audit() const {
    std::vector<RequestId> live;
    for (Request* r : Active()) live.push_back(r->id());
    return kv_->Audit(live, {}, false);
  }

  kv::KvManager& kv() { return *kv_; }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Request>> requests_;
};

std::vector<int64_t> Ids(const std::vector<Request*>& rs) {
  std::vector<int64_t> out;
  for (const Request* r : rs) out.push_back(r->id().value());
  return out;
}

std::vector<int64_t> ChunkIds(const ScheduleDecision& d) {
  std::vector<int64_t> out;
  for (const ScheduledChunk& c : d.context) out.push_back(c.request->id().value());
  return out;
}

SchedulerConfig Config(int max_batch, int64_t max_tokens, int64_t chunk) {
  SchedulerConfig c;
  c.max_batch_size = max_batch;
  c.max_num_tokens = max_tokens;
  c.chunk_size = chunk;
  c.prefix_reuse = false;
  return c;
}

// A multi-step trace in the style of TensorRT-LLM's capacity-scheduler tests: for each
// step range, the expected scheduled context and generation ids.
struct Expected {
  int from_step;
  int to_step;
  std::vector<int64_t> context;
  std::vector<int64_t> generation;
};

void RunTrace(Harness& h, const std::vector<Expected>& table) {
  int step = 0;
  for (const Expected& e : table) {
    for (; step <= e.to_step; ++step) {
      const ScheduleDecision d = h.Step();
      ASSERT_EQ(ChunkIds(d), e.context) << "step " << step;
      ASSERT_EQ(Ids(d.generation), e.generation) << "step " << step;
      ASSERT_THAT(h.Audit(), IsEmpty()) << "step " << step;
    }
  }
}

TEST(SchedulerTest, GenerationFirstThenContextWithinBatchSize) {
  Harness h(Config(/*max_batch=*/2, 64, 64), 64);
  h.Add(1, 8, 3);
  h.Add(2, 8, 3);
  h.Add(3, 8, 2);
  RunTrace(h, {
                  {0, 0, {1, 2}, {}},  // two prefills fill the batch; 3 waits
                  {1, 3, {}, {1, 2}},  // generation first; 1 and 2 finish (3 tokens)
                  {4, 4, {3}, {}},
                  {5, 6, {}, {3}},
              });
}

TEST(SchedulerTest, ChunkedPrefillAcrossSteps) {
  Harness h(Config(4, /*max_tokens=*/10, /*chunk=*/6), 64);
  h.Add(1, 14, 1);
  h.Add(2, 3, 2);
  const ScheduleDecision d0 = h.Step();
  ASSERT_EQ(d0.context.size(), 2u);
  EXPECT_EQ(d0.context[0].num_tokens, 6);  // chunk limit
  EXPECT_FALSE(d0.context[0].last_chunk);
  EXPECT_EQ(d0.context[1].num_tokens, 3);  // fits the rest of the token budget
  EXPECT_TRUE(d0.context[1].last_chunk);
  const ScheduleDecision d1 = h.Step();
  EXPECT_EQ(Ids(d1.generation), (std::vector<int64_t>{2}));
  ASSERT_EQ(d1.context.size(), 1u);
  EXPECT_EQ(d1.context[0].position, 6);
  EXPECT_EQ(d1.context[0].num_tokens, 6);
  const ScheduleDecision d2 = h.Step();
  ASSERT_EQ(d2.context.size(), 1u);
  EXPECT_EQ(d2.context[0].position, 12);
  EXPECT_EQ(d2.context[0].num_tokens, 2);
  EXPECT_TRUE(d2.context[0].last_chunk);
}

TEST(SchedulerTest, TokenBudgetCountsDraftSlots) {
  SchedulerConfig c = Config(8, /*max_tokens=*/9, 64);
  c.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3};  // 4 per step
  Harness h(c, 64, kv::DraftMode::kPaired);
  for (int i = 1; i <= 3; ++i) h.Add(i, 2, 10);
  h.Step();  // 2+2+2 = 6 tokens of prefill: all three fit
  const ScheduleDecision d = h.Step();
  EXPECT_EQ(Ids(d.generation), (std::vector<int64_t>{1, 2}));  // 8 of 9 tokens
  EXPECT_EQ(d.num_tokens, 8);
}

TEST(SchedulerTest, PausesYoungestUnderKvPressureAndResumes) {
  // 6 blocks of 4 tokens. Three requests of 8-token prompts take 2 blocks each; then
  // generation needs more blocks, so the youngest is paused and later recomputed.
  Harness h(Config(4, 64, 64), /*num_blocks=*/6);
  h.Add(1, 8, 6);
  h.Add(2, 8, 6);
  h.Add(3, 8, 6);
  const ScheduleDecision d0 = h.Step();
  EXPECT_EQ(ChunkIds(d0), (std::vector<int64_t>{1, 2, 3}));
  const ScheduleDecision d1 = h.Step();
  EXPECT_EQ(Ids(d1.generation), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ids(d1.paused), (std::vector<int64_t>{3}));  // youngest paused for request 1
  EXPECT_EQ(h.scheduler().stats().paused, 1);
  ASSERT_THAT(h.Audit(), IsEmpty());
  // Request 3 waits (context again: prompt + what it had generated) and resumes once
  // requests 1 and 2 finish.
  bool resumed = false;
  for (int i = 0; i < 20 && !resumed; ++i) {
    const ScheduleDecision d = h.Step();
    ASSERT_THAT(h.Audit(), IsEmpty());
    for (const ScheduledChunk& c : d.context) resumed |= c.request->id() == RequestId(3);
  }
  EXPECT_TRUE(resumed);
}

TEST(SchedulerTest, OldestStartedGoesFirstSoTheSystemProgresses) {
  // Two mid-prefill requests hold most of a small pool; the one that started first
  // must be able to finish by pausing the younger one, whatever the arrival order.
  Harness h(Config(4, 64, /*chunk=*/4), /*num_blocks=*/5);
  Request* a = h.Add(1, 12, 1);
  Request* b = h.Add(2, 12, 1);
  h.Step();               // both prefill 4 tokens
  a->set_start_order(5);  // pretend a restarted after b
  b->set_start_order(0);
  const ScheduleDecision d = h.Step();
  ASSERT_FALSE(d.context.empty());
  EXPECT_EQ(d.context[0].request, b);
}

TEST(SchedulerTest, RollbackRestoresEveryPoolExactly) {
  SchedulerConfig c = Config(4, 64, 64);
  c.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 2};
  Harness h(c, 32, kv::DraftMode::kUnpaired);
  h.Add(1, 5, 4);
  h.Add(2, 7, 4);
  h.Step();  // prefill
  const kv::ManagerStats before = h.kv().Stats();
  const auto cap1 = h.kv().Info(RequestId(1), kv::PoolKind::kTarget)->capacity;
  const auto dcap1 = h.kv().Info(RequestId(1), kv::PoolKind::kDraft)->capacity;
  h.Add(3, 6, 4);  // a new request: its cache is created this step
  const ScheduleDecision d = h.Step(/*commit=*/false);  // vetoed
  EXPECT_EQ(d.generation.size(), 2u);
  EXPECT_EQ(d.context.size(), 1u);
  const kv::ManagerStats after = h.kv().Stats();
  EXPECT_EQ(after.target.free_blocks, before.target.free_blocks);
  EXPECT_EQ(after.draft->free_blocks, before.draft->free_blocks);
  EXPECT_EQ(h.kv().Info(RequestId(1), kv::PoolKind::kTarget)->capacity, cap1);
  EXPECT_EQ(h.kv().Info(RequestId(1), kv::PoolKind::kDraft)->capacity, dcap1);
  EXPECT_FALSE(h.kv().Has(RequestId(3), kv::PoolKind::kTarget));
  EXPECT_FALSE(h.kv().Has(RequestId(3), kv::PoolKind::kDraft));
  EXPECT_THAT(h.Audit(), IsEmpty());
}

TEST(SchedulerTest, DummyMirrorIsCreatedAndRolledBackInEveryPool) {
  SchedulerConfig c = Config(2, 64, 64);
  c.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3, .dynamic = true};
  Harness h(c, 16, kv::DraftMode::kUnpaired);
  auto dummy = Request::MakeDummy(h.kv().dummy_id(), absl::UnixEpoch());
  for (bool post_schedule : {false, true}) {
    SCOPED_TRACE(post_schedule ? "ScheduleDummy" : "Schedule");
    Rollback rollback;
    ScheduleDecision d;
    if (post_schedule) {
      ASSERT_TRUE(h.scheduler().ScheduleDummy(dummy.get(), &d, &rollback));
    } else {
      d = h.scheduler().Schedule({dummy.get()}, false, &rollback);
    }
    ASSERT_THAT(Ids(d.generation), ElementsAre(h.kv().dummy_id().value()));
    // The scheduler admitted a draft mirror for the dummy and grew both pools by 1 + K
    // (the instance's K, dynamic or not), the grant the decision carries.
    ASSERT_EQ(d.generation_grants.size(), 1u);
    EXPECT_EQ(d.generation_grants[0].num_draft_tokens, 3);
    EXPECT_EQ(d.generation_grants[0].target_tokens, 4);
    EXPECT_EQ(d.generation_grants[0].draft_tokens, 4);
    EXPECT_EQ(h.kv().Info(h.kv().dummy_id(), kv::PoolKind::kTarget)->capacity, 4);
    EXPECT_EQ(h.kv().Info(h.kv().dummy_id(), kv::PoolKind::kDraft)->capacity, 4);
    rollback.Undo(h.kv());
    EXPECT_FALSE(h.kv().Has(h.kv().dummy_id(), kv::PoolKind::kTarget));
    EXPECT_FALSE(h.kv().Has(h.kv().dummy_id(), kv::PoolKind::kDraft));
  }
}

// With dynamic K, each generation step is granted 1 + the request's current K in the
// target pool and in its draft mirror, and K follows the request's acceptance: down
// while drafts fail, back up as they succeed.
TEST(SchedulerTest, DynamicKGrantIsOnePlusTheRequestsCurrentK) {
  SchedulerConfig c = Config(2, 64, 64);
  c.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 4, .dynamic = true};
  Harness h(c, 64, kv::DraftMode::kUnpaired);
  Request* r = h.Add(1, 6, 100);
  h.Step();  // prefill
  ASSERT_EQ(r->state(), RequestState::kGenerationInProgress);
  EXPECT_EQ(r->dynamic_k().max_k(), 4) << "made with the instance's K";
  std::set<int> seen;
  for (int step = 0; step < 40; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int k = r->dynamic_k().k();
    seen.insert(k);
    EXPECT_EQ(h.scheduler().DraftTokensFor(*r), k);
    const kv::CacheInfo target = *h.kv().Info(r->id(), kv::PoolKind::kTarget);
    const kv::CacheInfo draft = *h.kv().Info(r->id(), kv::PoolKind::kDraft);
    Rollback rollback;
    const ScheduleDecision d = h.scheduler().Schedule(h.Active(), false, &rollback);
    ASSERT_THAT(Ids(d.generation), ElementsAre(1));
    const spec::Grant& grant = d.generation_grants[0];
    EXPECT_EQ(grant.num_draft_tokens, k);
    EXPECT_EQ(grant.target_tokens, 1 + k);
    EXPECT_EQ(grant.draft_tokens, 1 + k);
    EXPECT_EQ(d.num_tokens, 1 + k);
    EXPECT_EQ(h.kv().Info(r->id(), kv::PoolKind::kTarget)->capacity, target.capacity + 1 + k);
    EXPECT_EQ(h.kv().Info(r->id(), kv::PoolKind::kDraft)->capacity, draft.capacity + 1 + k);
    rollback.Undo(h.kv());
    // Drafts fail for the first 12 steps, then every one is accepted.
    r->RecordAcceptance(k, step < 12 ? 0 : k);
  }
  EXPECT_TRUE(seen.count(0)) << "K fell to 0 while drafts failed";
  EXPECT_TRUE(seen.count(4)) << "K started at, and grew back to, the instance's K";
  EXPECT_GT(seen.size(), 2u) << "K took values in between";
  EXPECT_EQ(r->dynamic_k().k(), 4);
}

// K stops at the model's last position: a step whose last token may sit at the target
// capacity c verifies [c, c + 1 + K) with c + 1 + K <= max_position; at c =
// max_position even K = 0 does not fit and the request waits (its step in flight may
// have produced its last token). A last chunk's K stops there too.
TEST(SchedulerTest, KStopsAtTheModelsLastPosition) {
  SchedulerConfig c = Config(4, 64, 64);
  c.speculative = {.method = spec::Method::kNgram, .num_draft_tokens = 3};
  c.max_position = 20;
  Harness h(c, 64);
  Request* r = h.Add(1, 12, 8);  // 12 + 8 = 20 positions
  Request* tight = h.Add(2, 18, 2);
  Request* last = h.Add(3, 19, 1);
  ScheduleDecision d = h.Step();
  ASSERT_EQ(ChunkIds(d), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(d.context[0].grant.num_draft_tokens, 3);
  EXPECT_EQ(d.context[1].grant.num_draft_tokens, 1) << "drafts for position 19 only";
  EXPECT_EQ(d.context[2].grant.num_draft_tokens, 0) << "no position left for drafts";
  ASSERT_EQ(r->state(), RequestState::kGenerationInProgress);
  for (Request* other : {tight, last}) {
    other->Finish(FinishReason::kCancelled, absl::OkStatus(), absl::UnixEpoch());
    h.kv().Release(other->id());
  }
  for (int64_t capacity = 12; capacity <= 20; ++capacity) {
    SCOPED_TRACE(absl::StrCat("capacity ", capacity));
    ASSERT_THAT(h.kv().Resize(r->id(), kv::PoolKind::kTarget, capacity, capacity), testing::IsOk());
    Rollback rollback;
    d = h.scheduler().Schedule(h.Active(), /*in_flight=*/true, &rollback);
    if (capacity == 20) {
      EXPECT_THAT(d.generation, IsEmpty()) << "waits for the step in flight";
    } else {
      ASSERT_THAT(Ids(d.generation), ElementsAre(1));
      EXPECT_EQ(d.generation_grants[0].num_draft_tokens, std::min<int64_t>(3, 19 - capacity));
      EXPECT_LE(h.kv().Info(r->id(), kv::PoolKind::kTarget)->capacity, 20);
    }
    rollback.Undo(h.kv());
  }
}

TEST(SchedulerTest, TransferRequestsCountTowardTheCapButAreNeverScheduled) {
  SchedulerConfig c = Config(4, 64, 64);
  c.max_num_active_requests = 2;
  Harness h(c, 32);
  Request* g1 = h.Add(1, 8, 4, RequestType::kGenerationOnly);
  Request* g2 = h.Add(2, 8, 4, RequestType::kGenerationOnly);
  const ScheduleDecision d = h.Step();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(Ids(d.transfer_receives), (std::vector<int64_t>{1, 2}));
  g1->TransitionTo(RequestState::kGenTransferInProgress);
  g2->TransitionTo(RequestState::kGenTransferInProgress);
  EXPECT_EQ(Scheduler::CountActive(h.Active()), 2);
  EXPECT_EQ(Scheduler::CountSchedulable(h.Active()), 0);
  EXPECT_TRUE(h.scheduler().AtCap(h.Active()));
  const ScheduleDecision d2 = h.Step();
  EXPECT_TRUE(d2.empty());
  EXPECT_TRUE(d2.transfer_receives.empty());  // already have their blocks
  EXPECT_FALSE(d2.no_progress);               // nothing schedulable: waiting is progress
}

TEST(SchedulerTest, NoProgressIsCountedNotFatal) {
  // A request that can never fit: candidates exist, nothing scheduled or in flight.
  Harness h(Config(4, 64, 64), /*num_blocks=*/2);
  h.Add(1, 16, 4);
  const ScheduleDecision d = h.Step();
  EXPECT_TRUE(d.empty());
  EXPECT_TRUE(d.no_progress);
  EXPECT_EQ(h.scheduler().stats().no_progress, 1);
}

}  // namespace
}  // namespace lockstep::sched

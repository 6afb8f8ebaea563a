// CapacityPolicy::kGuaranteedNoEvict: a new request is admitted only when it and every
// request holding KV can finish (prompt plus max_tokens) without pausing anyone; under
// kMaxUtilization it is admitted while blocks last.
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"

namespace lockstep::sched {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int kTpb = 4;

std::vector<int32_t> Prompt(int n, int32_t first) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(first + i);
  return p;
}

std::unique_ptr<kv::KvManager> MakeKv(int num_blocks) {
  kv::KvManagerConfig kc;
  kc.target.layout = {1, 1, 1, kTpb};
  kc.target.num_blocks = num_blocks;
  return *kv::KvManager::Create(kc);
}

SchedulerConfig Config(CapacityPolicy policy) {
  SchedulerConfig config;
  config.max_batch_size = 4;
  config.max_num_tokens = 256;
  config.chunk_size = 256;
  config.prefix_reuse = false;
  config.capacity_policy = policy;
  return config;
}

std::unique_ptr<Request> Make(int64_t id, int prompt, int32_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return std::make_unique<Request>(RequestId(id), RequestType::kAggregated,
                                   Prompt(prompt, 100 * static_cast<int32_t>(id)), p,
                                   absl::UnixEpoch());
}

// 8 blocks of 4 tokens. a (8 + 8 tokens) holds 3 blocks after its prefill and may grow
// to 5; b needs 5 of its own: 3 + 2 + 5 > 8.
TEST(SchedulerCapacityTest, GuaranteedNoEvictAdmitsOnlyWhatEveryHolderCanFinishBeside) {
  for (CapacityPolicy policy :
       {CapacityPolicy::kMaxUtilization, CapacityPolicy::kGuaranteedNoEvict}) {
    SCOPED_TRACE(CapacityPolicyName(policy));
    std::unique_ptr<kv::KvManager> kv = MakeKv(8);
    Scheduler scheduler(Config(policy), kv.get());
    std::unique_ptr<Request> a = Make(1, 8, 8);
    std::unique_ptr<Request> b = Make(2, 8, 8);
    Rollback rollback;
    const ScheduleDecision d = scheduler.Schedule({a.get(), b.get()}, false, &rollback);
    rollback.Commit();
    if (policy == CapacityPolicy::kMaxUtilization) {
      ASSERT_THAT(d.context, SizeIs(2));
      EXPECT_TRUE(kv->Has(b->id(), kv::PoolKind::kTarget));
    } else {
      ASSERT_THAT(d.context, SizeIs(1));
      EXPECT_EQ(d.context[0].request, a.get());
      EXPECT_FALSE(kv->Has(b->id(), kv::PoolKind::kTarget));  // b holds nothing while it waits
      EXPECT_EQ(b->start_order(), -1);
    }
    EXPECT_THAT(d.paused, IsEmpty());
  }
}

TEST(SchedulerCapacityTest, AWaitingRequestIsAdmittedOnceTheHolderLeaves) {
  std::unique_ptr<kv::KvManager> kv = MakeKv(8);
  Scheduler scheduler(Config(CapacityPolicy::kGuaranteedNoEvict), kv.get());
  std::unique_ptr<Request> a = Make(1, 8, 8);
  std::unique_ptr<Request> b = Make(2, 8, 8);
  Rollback first;
  ASSERT_THAT(scheduler.Schedule({a.get(), b.get()}, false, &first).context, SizeIs(1));
  first.Commit();
  kv->Release(a->id());  // a finished
  Rollback second;
  const ScheduleDecision d = scheduler.Schedule({b.get()}, false, &second);
  second.Commit();
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].request, b.get());
}

// Room for both to finish (8 + 4 + 1 tokens each): a holds 3 blocks after its prefill
// and may grow by 4 tokens more; b's 13 and a's 4 take the 5 blocks left.
TEST(SchedulerCapacityTest, RequestsThatCanAllFinishAreAdmittedTogether) {
  std::unique_ptr<kv::KvManager> kv = MakeKv(8);
  Scheduler scheduler(Config(CapacityPolicy::kGuaranteedNoEvict), kv.get());
  std::unique_ptr<Request> a = Make(1, 8, 4);
  std::unique_ptr<Request> b = Make(2, 8, 4);
  Rollback rollback;
  EXPECT_THAT(scheduler.Schedule({a.get(), b.get()}, false, &rollback).context, SizeIs(2));
  rollback.Commit();
}

// No holder to protect: a request whose max_tokens exceeds the pool is still admitted
// (pausing stays the fallback), so the oldest request always progresses.
TEST(SchedulerCapacityTest, ALoneRequestIsAdmittedWhateverItsMaxTokens) {
  std::unique_ptr<kv::KvManager> kv = MakeKv(8);
  Scheduler scheduler(Config(CapacityPolicy::kGuaranteedNoEvict), kv.get());
  std::unique_ptr<Request> a = Make(1, 8, 1000);
  Rollback rollback;
  EXPECT_THAT(scheduler.Schedule({a.get()}, false, &rollback).context, SizeIs(1));
  rollback.Commit();
}

}  // namespace
}  // namespace lockstep::sched

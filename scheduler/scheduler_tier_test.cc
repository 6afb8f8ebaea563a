// KV tiers in the scheduler: a new request whose prefix comes back from the host tier
// while a batch is in flight keeps its cache but is not scheduled until the onboarding
// copy ran (after the collect); then its first chunk starts after the onboarded prefix.
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"

namespace lockstep::sched {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int kTpb = 4;

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(100 + i);
  return p;
}

TEST(SchedulerTierTest, ARequestWaitsForItsOnboardingCopyThenStartsAfterThePrefix) {
  SchedulerConfig config;
  config.max_batch_size = 4;
  config.max_num_tokens = 256;
  config.chunk_size = 256;
  config.prefix_reuse = true;
  kv::KvManagerConfig kc;
  kc.target.layout = {1, 1, 1, kTpb};
  kc.target.num_blocks = 8;
  kc.tiers.host_bytes = 64 * static_cast<int64_t>(kc.target.layout.BlockBytes());
  std::unique_ptr<kv::KvManager> kv = *kv::KvManager::Create(kc);
  Scheduler scheduler(config, kv.get());
  SamplingParams p;
  p.max_tokens = 4;
  Request a(RequestId(1), RequestType::kAggregated, Prompt(21), p, absl::UnixEpoch());
  Request b(RequestId(2), RequestType::kAggregated, Prompt(21), p, absl::UnixEpoch());

  Rollback first;
  ScheduleDecision d = scheduler.Schedule({&a}, /*in_flight=*/false, &first);
  first.Commit();
  ASSERT_THAT(d.context, SizeIs(1));
  ASSERT_THAT(kv->Resize(a.id(), kv::PoolKind::kTarget, std::nullopt, 21), IsOk());
  ASSERT_THAT(kv->Commit(a.id(), a.context_tokens()), IsOk());
  kv->Release(a.id());
  // Another cache takes the whole pool: a's published blocks are evicted (copied down).
  ASSERT_THAT(kv->CreateCache(RequestId(9)), IsOk());
  ASSERT_THAT(kv->Resize(RequestId(9), kv::PoolKind::kTarget, 32, 0), IsOk());
  kv->Release(RequestId(9));
  EXPECT_EQ(kv->ProbePrefix(b.context_tokens()), 0);

  kv->OnBatchLaunched();  // a batch is in flight
  Rollback second;
  d = scheduler.Schedule({&b}, /*in_flight=*/true, &second);
  second.Commit();
  EXPECT_THAT(d.context, IsEmpty());
  EXPECT_TRUE(kv->OnboardPending(b.id()));
  EXPECT_EQ(kv->Info(b.id(), kv::PoolKind::kTarget)->history, 20);
  EXPECT_THAT(kv->Audit({b.id()}, {}, false), IsEmpty());

  kv->OnBatchCollected();  // the copy runs
  EXPECT_FALSE(kv->OnboardPending(b.id()));
  Rollback third;
  d = scheduler.Schedule({&b}, /*in_flight=*/false, &third);
  third.Commit();
  ASSERT_THAT(d.context, SizeIs(1));
  EXPECT_EQ(d.context[0].position, 20);
  EXPECT_EQ(d.context[0].num_tokens, 1);
  // Still the first chunk of b's cache: the executor counts its prompt and the reused
  // prefix (prefix reuse per rank, usage.cached_tokens) once, here.
  EXPECT_TRUE(d.context[0].new_cache);
  EXPECT_EQ(kv->Stats().onboarded_tokens, 20);
  EXPECT_THAT(kv->Audit({b.id()}, {}, false), IsEmpty());
}

}  // namespace
}  // namespace lockstep::sched

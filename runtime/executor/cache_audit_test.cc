#include "runtime/executor/cache_audit.h"

#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::exec {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr kv::PoolKind kTarget = kv::PoolKind::kTarget;
constexpr RequestId kA(1), kB(2);

std::unique_ptr<kv::KvManager> Make() {
  kv::KvManagerConfig config;
  config.target.layout = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 4};
  config.target.num_blocks = 32;
  config.target.enable_prefix_reuse = false;
  absl::StatusOr<std::unique_ptr<kv::KvManager>> m = kv::KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return std::move(*m);
}

// A target cache of `id` with `history` tokens of `capacity`.
void Cache(kv::KvManager& kv, RequestId id, int64_t capacity, int64_t history) {
  ASSERT_THAT(kv.CreateCache(id), IsOk());
  ASSERT_THAT(kv.Resize(id, kTarget, capacity, history), IsOk());
}

int64_t NoAllowance(RequestId, kv::PoolKind, uint64_t) { return 0; }

std::vector<std::string> Violations(const CacheAudit& audit, const kv::KvManager& kv) {
  std::vector<std::string> out;
  audit.AppendViolations(kv, NoAllowance, &out);
  return out;
}

TEST(CacheAuditTest, AnOwnerBoundWithItsNewCacheIsClean) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 8);
  audit.Bind(*kv, kA);
  audit.EndPass(*kv, 1, [](RequestId id) { return id == kA; });
  EXPECT_THAT(Violations(audit, *kv), IsEmpty());
  EXPECT_EQ(audit.num_bindings(), 1u);
}

TEST(CacheAuditTest, ACacheOlderThanItsOwnerIsReportedUntilTheNextStep) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 8);  // issued before the pass that never saw kA as an owner
  audit.EndPass(*kv, 0, [](RequestId) { return false; });
  audit.Bind(*kv, kA);
  EXPECT_THAT(Violations(audit, *kv),
              ElementsAre(HasSubstr("request 1 (generation 1): cache predates its owner")));
  audit.BeginStep();
  EXPECT_THAT(Violations(audit, *kv), IsEmpty());
}

TEST(CacheAuditTest, ACacheReplacedBehindItsOwnersBackIsReported) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 8);
  audit.Bind(*kv, kA);
  audit.EndPass(*kv, 1, [](RequestId id) { return id == kA; });
  kv->Release(kA);
  Cache(*kv, kA, 8, 8);  // a new generation under the same id, never bound
  EXPECT_THAT(Violations(audit, *kv),
              ElementsAre(HasSubstr("not the cache its owner holds (generation 1)")));
  // Released between two passes, the next cache is bound afresh.
  audit.Forget(kA);
  audit.Bind(*kv, kA);
  EXPECT_THAT(Violations(audit, *kv), IsEmpty());
}

TEST(CacheAuditTest, EndPassDropsOnlyOwnersThatAreGone) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 8);
  Cache(*kv, kB, 8, 8);
  audit.Bind(*kv, kA);
  audit.Bind(*kv, kB);
  // As many owners as bindings: nothing is looked up.
  audit.EndPass(*kv, 2, [](RequestId) { return false; });
  EXPECT_EQ(audit.num_bindings(), 2u);
  audit.EndPass(*kv, 1, [](RequestId id) { return id == kA; });
  EXPECT_EQ(audit.num_bindings(), 1u);
  kv->Release(kB);
  EXPECT_THAT(Violations(audit, *kv), IsEmpty());
}

TEST(CacheAuditTest, CapacitiesAreCheckedAgainstTheAllowance) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 4);
  audit.Bind(*kv, kA);
  EXPECT_THAT(Violations(audit, *kv), ElementsAre(HasSubstr("capacity 8")));
  std::vector<std::string> out;
  audit.AppendViolations(
      *kv, [](RequestId, kv::PoolKind, uint64_t) -> int64_t { return 4; }, &out);
  EXPECT_THAT(out, IsEmpty());
}

TEST(CacheAuditTest, GrowthThatSurvivesAnUnforwardedStepIsRecordedForTheStep) {
  auto kv = Make();
  CacheAudit audit;
  Cache(*kv, kA, 8, 8);
  audit.Bind(*kv, kA);
  const kv::KvSnapshot before = kv::TakeSnapshot(*kv);
  audit.AuditUnforwardedStep(7, before, *kv, sched::ScheduleDecision());
  EXPECT_THAT(Violations(audit, *kv), IsEmpty());
  ASSERT_THAT(kv->Resize(kA, kTarget, 12, std::nullopt), IsOk());
  audit.AuditUnforwardedStep(7, before, *kv, sched::ScheduleDecision());
  std::vector<std::string> out;
  audit.AppendViolations(
      *kv, [](RequestId, kv::PoolKind, uint64_t) -> int64_t { return 4; }, &out);
  EXPECT_THAT(out, SizeIs(2));
  EXPECT_THAT(out, Each(HasSubstr("step 7 (not forwarded): ")));
  audit.BeginStep();
  out.clear();
  audit.AppendViolations(
      *kv, [](RequestId, kv::PoolKind, uint64_t) -> int64_t { return 4; }, &out);
  EXPECT_THAT(out, IsEmpty());
}

}  // namespace
}  // namespace lockstep::exec

#include "runtime/worker/executor_settings.h"

#include <stdlib.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ExecutorSettingsTest, TheDisaggregatedExampleMapsFieldByField) {
  absl::StatusOr<config::DeploymentConfig> d =
      config::LoadDeploymentConfig("deploy/local/disagg_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(d, IsOk());
  const config::InstanceConfig* gen = d->FindInstance("gen0");
  ASSERT_NE(gen, nullptr);
  const kv::BlockLayout target{4, 2, 32, 16}, draft{1, 2, 32, 16};
  absl::StatusOr<exec::ExecutorConfig> c = MakeExecutorConfig(*d, *gen, 3, target, draft);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->role, sched::InstanceRole::kGeneration);
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->world_size, 4);
  EXPECT_EQ(c->scheduler.max_batch_size, 2);
  EXPECT_EQ(c->scheduler.speculative.method, spec::Method::kDraftModel);
  EXPECT_EQ(c->scheduler.speculative.num_draft_tokens, 3);
  EXPECT_EQ(c->scheduler.dummy_policy, sched::DummyPolicy::kReserved);
  EXPECT_EQ(c->kv.draft_mode, kv::DraftMode::kUnpaired);
  EXPECT_EQ(c->kv.target.layout, target);
  EXPECT_EQ(c->kv.draft.layout, draft);
  EXPECT_EQ(c->kv.dummy_reserved_tokens, 4);  // 1 + K, for the reserved dummy
  EXPECT_EQ(c->transfer_deadline, absl::Milliseconds(gen->transfer.deadline_ms));
  // The same model gives the same salt; another model another one.
  config::ModelConfig other = d->model;
  other.path += "-other";
  EXPECT_EQ(ModelSalt(d->model), ModelSalt(d->model));
  EXPECT_NE(ModelSalt(d->model), ModelSalt(other));
}

// The YAML's scheduling knobs are the scheduler's own struct: a file that omits them
// runs with the scheduler's defaults (chunk_size 64), one that sets them reaches the
// scheduler field by field.
TEST(ExecutorSettingsTest, SchedulingKnobsAreTheSchedulersOwn) {
  static_assert(std::is_same_v<config::InstanceRole, sched::InstanceRole>);
  static_assert(std::is_same_v<config::DummyPolicy, sched::DummyPolicy>);
  const kv::BlockLayout layout{4, 2, 32, 16};
  const std::string model = "model: {name: m, path: /m}\n";
  absl::StatusOr<config::DeploymentConfig> omitted = config::ParseDeploymentConfig(
      model +
          "instances:\n  - {name: a, role: context, world_size: 1}\n"
          "  - {name: b, role: generation, world_size: 1}\n",
      "");
  ASSERT_THAT(omitted, IsOk());
  absl::StatusOr<exec::ExecutorConfig> c =
      MakeExecutorConfig(*omitted, omitted->instances[0], 0, layout, layout);
  ASSERT_THAT(c, IsOk());
  const sched::SchedulerConfig defaults;
  EXPECT_EQ(c->role, sched::InstanceRole::kContext);
  EXPECT_EQ(c->scheduler.max_batch_size, defaults.max_batch_size);
  EXPECT_EQ(c->scheduler.max_num_tokens, defaults.max_num_tokens);
  EXPECT_EQ(c->scheduler.max_num_active_requests, defaults.max_num_active_requests);
  EXPECT_EQ(c->scheduler.chunk_size, defaults.chunk_size);
  EXPECT_EQ(c->scheduler.chunk_size, 64);
  EXPECT_EQ(c->scheduler.dummy_policy, defaults.dummy_policy);
  EXPECT_EQ(c->scheduler.capacity_policy, sched::CapacityPolicy::kMaxUtilization);

  absl::StatusOr<config::DeploymentConfig> set = config::ParseDeploymentConfig(
      model +
          "instances:\n  - {name: a, role: aggregated, world_size: 1, executor: "
          "{max_batch_size: 3, max_num_tokens: 96, max_num_active_requests: 5, chunk_size: 40, "
          "dummy_policy: compat, capacity_policy: guaranteed_no_evict}}\n",
      "");
  ASSERT_THAT(set, IsOk());
  c = MakeExecutorConfig(*set, set->instances[0], 0, layout, layout);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->role, sched::InstanceRole::kAggregated);
  EXPECT_EQ(c->scheduler.max_batch_size, 3);
  EXPECT_EQ(c->scheduler.max_num_tokens, 96);
  EXPECT_EQ(c->scheduler.max_num_active_requests, 5);
  EXPECT_EQ(c->scheduler.chunk_size, 40);
  EXPECT_EQ(c->scheduler.dummy_policy, sched::DummyPolicy::kCompat);
  EXPECT_EQ(c->scheduler.capacity_policy, sched::CapacityPolicy::kGuaranteedNoEvict);
}

// A CUDA rank with an NCCL engine group loads its modules eagerly (set here, in the
// process); a rank without one changes nothing.
TEST(ExecutorSettingsTest, EagerModuleLoadingBesideAnNcclGroup) {
  config::InstanceConfig instance;
  instance.engine = config::EngineKind::kCuda;
  ASSERT_EQ(setenv("CUDA_MODULE_LOADING", "LAZY", 1), 0);
  EXPECT_EQ(UseEagerCudaModuleLoading(instance), std::nullopt);  // gloo: no NCCL group
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "LAZY");
  instance.comm.engine_transport = config::CommTransport::kNccl;
  EXPECT_EQ(UseEagerCudaModuleLoading(instance), "LAZY");
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "EAGER");
  ASSERT_EQ(unsetenv("CUDA_MODULE_LOADING"), 0);
  EXPECT_EQ(UseEagerCudaModuleLoading(instance), "");
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "EAGER");
  ASSERT_EQ(unsetenv("CUDA_MODULE_LOADING"), 0);
  instance.engine = config::EngineKind::kCpu;
  EXPECT_EQ(UseEagerCudaModuleLoading(instance), std::nullopt);
  EXPECT_EQ(std::getenv("CUDA_MODULE_LOADING"), nullptr);
}

// KV descriptors name the pools' element type: the CPU engine's f32, the CUDA engine's
// configured dtype (a bf16 CUDA rank described its 2-byte pools as f32 and refused to
// start its KV transfer).
TEST(ExecutorSettingsTest, KvDtypeFollowsTheEngine) {
  config::InstanceConfig instance;
  instance.engine = config::EngineKind::kCpu;
  EXPECT_EQ(KvDtypeName(instance), "f32");
  instance.engine = config::EngineKind::kCuda;
  instance.cuda.dtype = config::CudaDtype::kBf16;
  EXPECT_EQ(KvDtypeName(instance), "bf16");
  instance.cuda.dtype = config::CudaDtype::kF32;
  EXPECT_EQ(KvDtypeName(instance), "f32");
}

TEST(ExecutorSettingsTest, KvEventsOnPrefixLegsWithReuse) {
  absl::StatusOr<config::DeploymentConfig> d =
      config::LoadDeploymentConfig("deploy/local/disagg_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(d, IsOk());
  const kv::BlockLayout layout{1, 1, 1, 16};
  const auto kv_events = [&](const char* instance) {
    absl::StatusOr<exec::ExecutorConfig> c =
        MakeExecutorConfig(*d, *d->FindInstance(instance), 0, layout, layout);
    EXPECT_THAT(c, IsOk());
    return c.ok() && c->kv_events;
  };
  EXPECT_TRUE(kv_events("ctx0"));  // an unpaired draft pool reuses too
  for (config::InstanceConfig& i : d->instances) {
    if (i.name == "ctx0") i.executor.draft_pool = config::DraftPool::kPaired;
  }
  EXPECT_TRUE(kv_events("ctx0"));
  EXPECT_FALSE(kv_events("gen0"));  // generation legs are routed by load
  for (config::InstanceConfig& i : d->instances) i.kv.prefix_reuse = false;
  EXPECT_FALSE(kv_events("ctx0"));
}

// An engine waits for its device with the collective timeout; Collect waits with the
// engine timeout. The first must expire first, so a stuck forward comes back as the
// engine's Unavailable rather than as Collect's DeadlineExceeded.
TEST(ExecutorSettingsTest, TheEnginesWaitEndsBeforeCollectGivesUp) {
  absl::StatusOr<config::DeploymentConfig> d =
      config::LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(d, IsOk());
  for (const int64_t step_timeout_ms : {1, 1000, 30000, 120000, 3600000}) {
    SCOPED_TRACE(step_timeout_ms);
    config::InstanceConfig instance = d->instances[0];
    instance.executor.step_timeout_ms = step_timeout_ms;
    const StepTimeouts timeouts = StepTimeoutsFor(instance);
    EXPECT_GE(timeouts.engine - timeouts.collective, absl::Seconds(30));
    EXPECT_GE(timeouts.collective, absl::Milliseconds(2 * step_timeout_ms));
    absl::StatusOr<exec::ExecutorConfig> c =
        MakeExecutorConfig(*d, instance, 0, {1, 1, 1, 16}, {1, 1, 1, 16});
    ASSERT_THAT(c, IsOk());
    EXPECT_EQ(c->collective_timeout, timeouts.collective);
    EXPECT_EQ(c->engine_timeout, timeouts.engine);
  }
}

TEST(ExecutorSettingsTest, KvTiersReachTheKvManagerAndNeedNoDraftPool) {
  absl::StatusOr<config::DeploymentConfig> d =
      config::LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(d, IsOk());
  config::InstanceConfig i = d->instances[0];
  i.executor.draft_pool = config::DraftPool::kNone;
  i.kv.host_tier_bytes = 1 << 20;
  i.kv.disk_tier_path = "kv-disk";
  i.kv.disk_tier_bytes = 1 << 22;
  absl::StatusOr<exec::ExecutorConfig> c = MakeExecutorConfig(*d, i, 0, {1, 1, 1, 16}, {1, 1, 1, 16});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kv.tiers.host_bytes, 1 << 20);
  EXPECT_EQ(c->kv.tiers.disk_path, "kv-disk");
  EXPECT_EQ(c->kv.tiers.disk_bytes, 1 << 22);
  i.executor.draft_pool = config::DraftPool::kPaired;
  EXPECT_THAT(MakeExecutorConfig(*d, i, 0, {1, 1, 1, 16}, {1, 1, 1, 16}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_tiers")));
}

TEST(ExecutorSettingsTest, AnInconsistentInstanceIsAnErrorNamingIt) {
  absl::StatusOr<config::DeploymentConfig> d =
      config::LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(d, IsOk());
  config::InstanceConfig broken = d->instances[0];
  broken.executor.max_num_tokens = 0;  // bypasses the YAML validation on purpose
  EXPECT_THAT(MakeExecutorConfig(*d, broken, 0, {1, 1, 1, 16}, {1, 1, 1, 16}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("agg0")));
}

}  // namespace
}  // namespace lockstep::worker

#include "runtime/worker/executor_settings.h"

#include <stdlib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {

uint64_t ModelSalt(const config::ModelConfig& model) {
  // FNV-1a: stable across processes and builds.
  uint64_t h = 1469598103934665603ull;
  for (const std::string* s : {&model.name, &model.path, &model.draft_path}) {
    for (unsigned char c : *s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
  return h;
}

std::optional<std::string> UseEagerCudaModuleLoading(const config::InstanceConfig& instance) {
  if (instance.engine != config::EngineKind::kCuda ||
      (instance.comm.engine_transport != config::CommTransport::kNccl &&
       instance.comm.vote_transport != config::CommTransport::kNccl)) {
    return std::nullopt;
  }
  const char* before = std::getenv("CUDA_MODULE_LOADING");
  std::string replaced = before != nullptr ? before : "";
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/1);
  return replaced;
}

StepTimeouts StepTimeoutsFor(const config::InstanceConfig& instance) {
  // A step may legitimately take a while on a loaded CPU; Health reports slowness
  // against step_timeout_ms, while collectives and the engine get a wider margin.
  const absl::Duration step_timeout = absl::Milliseconds(instance.executor.step_timeout_ms);
  return {.collective = std::max(absl::Seconds(30), 2 * step_timeout),
          .engine = std::max(absl::Seconds(60), 4 * step_timeout)};
}

absl::StatusOr<exec::ExecutorConfig> MakeExecutorConfig(const config::DeploymentConfig& deployment,
                                                        const config::InstanceConfig& instance,
                                                        int rank,
                                                        const kv::BlockLayout& target_layout,
                                                        const kv::BlockLayout& draft_layout) {
  exec::ExecutorConfig c;
  c.instance = instance.name;
  c.role = instance.role;
  c.rank = rank;
  c.world_size = static_cast<int32_t>(instance.world_size);
  const config::ExecutorSettings& e = instance.executor;
  // The YAML's scheduling knobs as written; then what comes from the other blocks.
  static_cast<sched::SchedulerSettings&>(c.scheduler) = e;
  c.scheduler.speculative = config::EffectiveSpeculative(instance);
  c.scheduler.prefix_reuse = instance.kv.prefix_reuse;

  const uint64_t salt = ModelSalt(deployment.model);
  c.kv.target.layout = target_layout;
  c.kv.target.num_blocks = static_cast<int32_t>(instance.kv.num_blocks);
  c.kv.target.enable_prefix_reuse = instance.kv.prefix_reuse;
  c.kv.target.reuse_salt = salt;
  c.kv.draft_mode = e.draft_pool;
  c.kv.draft.layout = draft_layout;
  c.kv.draft.num_blocks = static_cast<int32_t>(instance.kv.draft_num_blocks);
  c.kv.draft.enable_prefix_reuse = instance.kv.prefix_reuse;
  c.kv.draft.reuse_salt = salt ^ 0x5bd1e995u;
  c.kv.tiers.host_bytes = instance.kv.host_tier_bytes;
  c.kv.tiers.disk_path = instance.kv.disk_tier_path;
  c.kv.tiers.disk_bytes = instance.kv.disk_tier_bytes;
  if (c.scheduler.dummy_policy == sched::DummyPolicy::kReserved) {
    c.kv.dummy_reserved_tokens = static_cast<int32_t>(c.scheduler.generation_step_tokens());
  }
  const StepTimeouts timeouts = StepTimeoutsFor(instance);
  c.collective_timeout = timeouts.collective;
  c.engine_timeout = timeouts.engine;
  c.audit_every_step = e.audit_every_step;
  // KV events feed the router's prefix index (kv_aware routing, and the prefix-hit
  // metric under every policy); generation legs are routed by load, so generation
  // instances publish none. Every draft mode reuses (an unpaired mirror from its own
  // tree), so the target's tree is what the router indexes.
  c.kv_events = instance.kv.prefix_reuse && instance.role != config::InstanceRole::kGeneration;
  c.transfer_deadline = absl::Milliseconds(instance.transfer.deadline_ms);
  c.claim_lease = absl::Milliseconds(instance.transfer.lease_ms);
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", instance.name, ": ", s.message()));
  }
  return c;
}

std::string KvDtypeName(const config::InstanceConfig& instance) {
  if (instance.engine != config::EngineKind::kCuda) return "f32";
  return std::string(config::CudaDtypeName(instance.cuda.dtype));
}

}  // namespace lockstep::worker

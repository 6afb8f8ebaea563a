// From the deployment file's instance section to the executor's configuration.
#ifndef LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_
#define LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/block_layout.h"
#include "runtime/config/deployment_config.h"
#include "runtime/executor/executor_config.h"

namespace lockstep::worker {

// `target_layout` / `draft_layout`: the block layouts the models need (from the engine).
absl::StatusOr<exec::ExecutorConfig> MakeExecutorConfig(const config::DeploymentConfig& deployment,
                                                        const config::InstanceConfig& instance,
                                                        int rank,
                                                        const kv::BlockLayout& target_layout,
                                                        const kv::BlockLayout& draft_layout);

// The executor's timeouts from `instance`'s executor.step_timeout_ms: `collective`
// bounds a collective and an engine's own wait for its device (the CPU and CUDA
// engines' collective_timeout), `engine` the executor's Collect. The collective bound
// is the shorter (the 30 s / 2 x floor below the 60 s / 4 x), so a device forward past
// its deadline comes back from Collect as the engine's Unavailable (a failed batch)
// before Collect itself gives up on the step.
struct StepTimeouts {
  absl::Duration collective;
  absl::Duration engine;
};
StepTimeouts StepTimeoutsFor(const config::InstanceConfig& instance);

// A stable identity of the served model (name and paths), mixed into prefix-reuse
// hashes and checked by KV transfer.
uint64_t ModelSalt(const config::ModelConfig& model);

// For a rank whose CUDA engine runs an NCCL group (`comm.engine_transport: nccl`)
// beside the executor's communicator, on other threads: sets CUDA_MODULE_LOADING=EAGER
// in this process (call it before the first CUDA call) and returns the value it
// replaced ("" when unset); nullopt, changing nothing, for any other rank. With lazy
// loading, a kernel's first launch may synchronize the context while an NCCL kernel
// spins waiting for a peer that waits in turn: the deadlock CUDA's lazy-loading notes
// warn of for kernels that must run concurrently. Eager loading does it all at start.
std::optional<std::string> UseEagerCudaModuleLoading(const config::InstanceConfig& instance);

// The element type of the instance's KV pools, as KV descriptors name it: "f32" on the
// CPU engine, the CUDA engine's dtype ("bf16" or "f32") on engine cuda. Both pools of a
// disaggregated deployment must agree.
std::string KvDtypeName(const config::InstanceConfig& instance);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_

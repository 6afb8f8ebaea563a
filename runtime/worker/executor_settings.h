// From the deployment file's instance section to the executor's configuration.
#ifndef LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_
#define LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_

#include <cstdint>

#include "absl/status/statusor.h"
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

// A stable identity of the served model (name and paths), mixed into prefix-reuse
// hashes and checked by KV transfer.
uint64_t ModelSalt(const config::ModelConfig& model);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_EXECUTOR_SETTINGS_H_

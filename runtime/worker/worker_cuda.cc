// The worker's `engine: cuda` start (part of Worker): the instance's groups first (the
// engine's NCCL group is keyed by their epoch), then the device engine (its models on
// this rank's GPU: the device index is the rank's local rank), then the KV pools in
// that GPU's memory, sized from what the weights left free when `kv.num_blocks: auto`,
// then the engine over them. Errors name the instance and, where a setting is the
// cause, the field. A binary built without CUDA stops earlier (Worker::Init).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/config/cuda_settings.h"
#include "runtime/engine/device_engine.h"
#include "runtime/worker/executor_settings.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {
namespace {

absl::Status InInstance(const std::string& instance, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("instance ", instance, ": ", status.message()));
}

}  // namespace

absl::Status Worker::StartDeviceEngine(const BootstrapOptions& boot,
                                       const spec::SpeculativeConfig& speculative) {
  const config::InstanceConfig& instance = *instance_;
  const config::DeploymentConfig& d = options_.deployment;
  // Before this process's first CUDA call (the engine's start below).
  if (const std::optional<std::string> replaced = UseEagerCudaModuleLoading(instance)) {
    LOCKSTEP_LOG_INFO("worker",
                      "instance {} rank {}: CUDA_MODULE_LOADING=EAGER{} (an NCCL group "
                      "beside the executor's communicator)",
                      instance.name, options_.rank,
                      replaced->empty() || *replaced == "EAGER" ? "" : " instead of " + *replaced);
  }
  ASSIGN_OR_RETURN(groups_, BootstrapInstance(boot));
  const int64_t ranks_per_node =
      instance.world_size / std::max<int64_t>(d.placement.nodes_per_instance, 1);
  engine::DeviceEngineOptions o;
  o.name = instance.name;
  o.model_dir = d.model.path;
  o.speculative = speculative;
  // Only a draft model drafts from model.draft_path (MTP's layer is the model's own;
  // the CUDA engine refuses a draft model directory with it).
  if (speculative.needs_draft_kv() && speculative.method == spec::Method::kDraftModel) {
    o.draft_model_dir = d.model.draft_path;
  }
  o.device = options_.device >= 0
                 ? options_.device
                 : static_cast<int>(config::CudaDeviceIndex(options_.rank, ranks_per_node));
  o.dtype = instance.cuda.dtype == config::CudaDtype::kF32 ? engine::DeviceDtype::kF32
                                                           : engine::DeviceDtype::kBf16;
  o.batch_invariant = instance.cuda.batch_invariant;
  o.graphs = instance.cuda.graphs;
  o.graph_batch_sizes = instance.cuda.graph_batch_sizes;
  o.tokens_per_block = static_cast<int>(instance.kv.tokens_per_block);
  o.max_batch_size = instance.executor.max_batch_size;
  o.max_num_tokens = instance.executor.max_num_tokens;
  o.rank = options_.rank;
  o.world_size = options_.world_size;
  o.nccl_group = instance.comm.engine_transport == config::CommTransport::kNccl;
  o.rendezvous_address = options_.rendezvous_address;
  o.epoch = groups_.epoch;
  o.bootstrap_timeout = options_.bootstrap_timeout;
  // As the CPU engine's: shorter than the executor's Collect timeout, so a forward past
  // it fails its batch with Unavailable (and aborts the expert group) before Collect
  // would report the step stuck.
  o.collective_timeout = StepTimeoutsFor(instance).collective;
  absl::StatusOr<std::unique_ptr<engine::DeviceEngineBuilder>> builder = engine::StartCudaEngine(o);
  if (!builder.ok()) {
    return InInstance(instance.name,
                      absl::Status(builder.status().code(),
                                   absl::StrCat("rank ", options_.rank, " on device ", o.device,
                                                ": ", builder.status().message())));
  }
  device_ = *std::move(builder);
  return absl::OkStatus();
}

absl::Status Worker::SizeDevicePools(exec::ExecutorConfig& config) const {
  const config::InstanceConfig& instance = *instance_;
  if (!instance.kv.num_blocks_auto) return absl::OkStatus();
  ASSIGN_OR_RETURN(const engine::DeviceMemoryInfo memory, device_->memory());
  // The engine may hold cuda.kv_fraction of the GPU in all: what it holds already (the
  // weights, scratch and NCCL group) counts against that share.
  const uint64_t used = memory.total_bytes - memory.free_bytes;
  const long double share =
      static_cast<long double>(memory.total_bytes) * instance.cuda.kv_fraction;
  uint64_t budget = share > used ? static_cast<uint64_t>(share - used) : 0;
  budget = std::min(budget, memory.free_bytes);
  if (config.kv.draft_mode != kv::DraftMode::kNone) {
    const uint64_t draft =
        static_cast<uint64_t>(config.kv.draft.num_blocks) * config.kv.draft.layout.BlockBytes();
    budget = budget > draft ? budget - draft : 0;
  }
  size_t index = 0;
  while (index < options_.deployment.instances.size() &&
         options_.deployment.instances[index].name != instance.name) {
    ++index;
  }
  const std::string field = absl::StrCat("instances[", index, "].kv.num_blocks");
  absl::StatusOr<int64_t> blocks =
      config::AutoKvNumBlocks(instance.kv, field, budget, config.kv.target.layout.BlockBytes());
  RETURN_IF_ERROR(InInstance(instance.name, blocks.status()));
  config.kv.target.num_blocks =
      static_cast<int32_t>(std::min<int64_t>(*blocks, std::numeric_limits<int32_t>::max()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<engine::ModelEngine>> Worker::FinishDeviceEngine(kv::KvManager& kv) {
  engine::DevicePools pools;
  pools.target = kv.Storage(kv::PoolKind::kTarget);
  pools.target_blocks = kv.num_blocks(kv::PoolKind::kTarget);
  if (kv.has_draft() && device_->draft_layout().has_value()) {
    pools.draft = kv.Storage(kv::PoolKind::kDraft);
    pools.draft_blocks = kv.num_blocks(kv::PoolKind::kDraft);
  }
  absl::StatusOr<std::unique_ptr<engine::ModelEngine>> engine = device_->Finish(pools);
  if (!engine.ok()) return InInstance(instance_->name, engine.status());
  return engine;
}

}  // namespace lockstep::worker

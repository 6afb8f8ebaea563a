// The GPU engine behind `engine: cuda`, as the worker sees it (no CUDA header here: a
// binary built without CUDA links a stub whose StartCudaEngine says so; which one a
// binary links is //runtime/engine/device:cuda_engine).
//
// Built in two steps, because the KV pools live in device memory and are sized from
// what the weights leave free:
//
//   ASSIGN_OR_RETURN(std::unique_ptr<DeviceEngineBuilder> builder, StartCudaEngine(options));
//   ... size the pools with builder->target_layout() (and draft_layout()) and
//   ... builder->memory() (`kv.num_blocks: auto`), allocate them with builder->allocator()
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelEngine> engine, builder->Finish(pools));
//
// StartCudaEngine selects the device, loads the models (weights converted once on the
// host and copied over; with expert parallelism only this rank's experts) and, with
// `nccl_group`, makes the engine's NCCL group through the rendezvous. Finish binds the
// pools, captures the decode graphs (unless disabled) and starts the engine thread
// (engine_thread.h) over the same batch runner as the CPU engine (cpu/batch_runner.h).
//
// The builder owns the device allocator and the NCCL group: it must outlive the engine
// and the KV pools. Thread-compatible (the worker's start-up thread).
#ifndef LOCKSTEP_RUNTIME_ENGINE_DEVICE_ENGINE_H_
#define LOCKSTEP_RUNTIME_ENGINE_DEVICE_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/model_engine.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {

// The weights' and activations' type on the device (`cuda.dtype`).
enum class DeviceDtype { kBf16, kF32 };

struct DeviceEngineOptions {
  std::string name;  // the instance, in errors and logs
  std::string model_dir;
  // What the engine speculates with, the instance's `speculative:` block as is (checked
  // by SpeculativeConfig::Validate; the default speculates not at all).
  spec::SpeculativeConfig speculative;
  std::string draft_model_dir;  // speculative.method kDraftModel

  int device = 0;  // this rank's GPU: its local rank
  DeviceDtype dtype = DeviceDtype::kBf16;
  bool batch_invariant = false;
  bool graphs = true;                      // capture decode graphs
  std::vector<int64_t> graph_batch_sizes;  // empty: the default buckets (graph_buckets.h)
  int tokens_per_block = 16;
  // The scheduler's bounds (executor.max_batch_size, max_num_tokens), which size the
  // engine's scratch and its graphs.
  int64_t max_batch_size = 8;
  int64_t max_num_tokens = 256;

  int rank = 0;
  int world_size = 1;
  // Make the expert-parallel NCCL group (`comm.engine_transport: nccl`): rank 0
  // publishes its id under "<epoch>/nccl/engine/uid" in the instance's key space of the
  // rendezvous at `rendezvous_address`. Without it the engine has no group, which
  // suits one rank or a dense model.
  bool nccl_group = false;
  std::string rendezvous_address;
  std::string epoch;
  absl::Duration bootstrap_timeout = absl::Seconds(60);
  // The bound on one forward's wait for the device (and its collectives).
  absl::Duration collective_timeout = absl::Seconds(60);
};

struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// The KV pools the engine runs on (device memory from allocator()).
struct DevicePools {
  std::byte* target = nullptr;
  int32_t target_blocks = 0;
  std::byte* draft = nullptr;  // with a draft model only
  int32_t draft_blocks = 0;
};

class DeviceEngineBuilder {
 public:
  virtual ~DeviceEngineBuilder() = default;

  virtual EngineInfo info() const = 0;
  virtual kv::BlockLayout target_layout() const = 0;
  // The draft model's pool layout; nullopt without a draft model.
  virtual std::optional<kv::BlockLayout> draft_layout() const = 0;
  // Allocates the pools in the engine's device memory (owned by the builder).
  virtual kv::BlockAllocator* allocator() = 0;
  // The device's memory now (after the weights, scratch and NCCL group).
  virtual absl::StatusOr<DeviceMemoryInfo> memory() const = 0;
  // Once: binds the pools and starts the engine.
  virtual absl::StatusOr<std::unique_ptr<ModelEngine>> Finish(const DevicePools& pools) = 0;
};

// FailedPrecondition in a binary built without CUDA (the message says so).
absl::StatusOr<std::unique_ptr<DeviceEngineBuilder>> StartCudaEngine(
    const DeviceEngineOptions& options);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_DEVICE_ENGINE_H_

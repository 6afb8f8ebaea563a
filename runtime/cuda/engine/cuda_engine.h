// The CUDA engine (`engine: cuda`): the DeviceEngineBuilder of runtime/engine/
// device_engine.h over CudaTransformer, the same batch runner and drafters as the CPU
// engine, and the engine thread. StartCudaEngine (declared there) returns one of these
// in a CUDA build.
//
// Speculation: n-gram, a draft model, or the model's own MTP layer (cuda_mtp.h, its KV in
// the draft pool) under the CPU engine's drafters and acceptance.
//
// Bounds: one forward holds at most max_num_tokens + max_batch_size + 1 rows (the
// target's step, or a draft pass that catches up and proposes) and max_batch_size + 1
// sequences; decode graphs are captured for the buckets of GraphBuckets::Plan over
// max_batch_size and K, for the target and (MTP) the MTP layer alike, all warmed up
// and captured in Finish.
//
// Thread-compatible (start-up); the engine it makes follows model_engine.h.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_ENGINE_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_ENGINE_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "runtime/cuda/device_block_allocator.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/nccl_group.h"
#include "runtime/engine/device_engine.h"

namespace lockstep::cuda {

// The model options of `options` for the target (draft = false) or the draft model.
CudaModelOptions ModelOptionsFor(const engine::DeviceEngineOptions& options, bool draft,
                                 NcclGroup* group);

class CudaEngineBuilder final : public engine::DeviceEngineBuilder {
 public:
  static absl::StatusOr<std::unique_ptr<CudaEngineBuilder>> Start(
      const engine::DeviceEngineOptions& options);
  ~CudaEngineBuilder() override;

  engine::EngineInfo info() const override;
  kv::BlockLayout target_layout() const override;
  std::optional<kv::BlockLayout> draft_layout() const override;
  kv::BlockAllocator* allocator() override { return &allocator_; }
  absl::StatusOr<engine::DeviceMemoryInfo> memory() const override;
  absl::StatusOr<std::unique_ptr<engine::ModelEngine>> Finish(
      const engine::DevicePools& pools) override;

  // Before Finish: the models (for checks that drive them directly).
  CudaTransformer* target() const { return target_.get(); }
  CudaTransformer* draft() const { return draft_.get(); }
  CudaTransformer* mtp() const { return mtp_.get(); }

 private:
  explicit CudaEngineBuilder(const engine::DeviceEngineOptions& options)
      : options_(options), allocator_(options.device) {}

  const engine::DeviceEngineOptions options_;
  DeviceBlockAllocator allocator_;
  std::unique_ptr<NcclGroup> group_;  // expert parallelism over NCCL; may be null
  std::unique_ptr<CudaTransformer> target_;
  std::unique_ptr<CudaTransformer> draft_;  // the draft model; null without one
  std::unique_ptr<CudaTransformer> mtp_;    // speculative.method mtp: the MTP layer; else null
  bool finished_ = false;
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_ENGINE_H_

#include "runtime/cuda/engine/device_test_engine.h"

#include <optional>
#include <utility>

#include "kvcache/block_layout.h"

namespace lockstep::cuda::testing {

DeviceTestEngine::~DeviceTestEngine() {
  engine_.reset();
  if (builder_ == nullptr) return;
  if (target_ != nullptr) builder_->allocator()->Free(target_, target_bytes_);
  if (draft_ != nullptr) builder_->allocator()->Free(draft_, draft_bytes_);
}

absl::Status DeviceTestEngine::Start(const engine::DeviceEngineOptions& options) {
  absl::StatusOr<std::unique_ptr<CudaEngineBuilder>> builder = CudaEngineBuilder::Start(options);
  if (!builder.ok()) return builder.status();
  builder_ = *std::move(builder);
  target_bytes_ = blocks_ * builder_->target_layout().BlockBytes();
  absl::StatusOr<std::byte*> target = builder_->allocator()->Allocate(target_bytes_);
  if (!target.ok()) return target.status();
  target_ = *target;
  engine::DevicePools pools{target_, blocks_};
  if (std::optional<kv::BlockLayout> draft = builder_->draft_layout()) {
    draft_bytes_ = blocks_ * draft->BlockBytes();
    absl::StatusOr<std::byte*> memory = builder_->allocator()->Allocate(draft_bytes_);
    if (!memory.ok()) return memory.status();
    draft_ = *memory;
    pools.draft = draft_;
    pools.draft_blocks = blocks_;
  }
  target_model_ = builder_->target();
  mtp_model_ = builder_->mtp();
  absl::StatusOr<std::unique_ptr<engine::ModelEngine>> engine = builder_->Finish(pools);
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  return absl::OkStatus();
}

}  // namespace lockstep::cuda::testing

// Test helper: a CUDA engine (CudaEngineBuilder) with its target and draft pools of
// `blocks` blocks in device memory, freed before the builder goes.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_TEST_ENGINE_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_TEST_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "runtime/cuda/engine/cuda_engine.h"
#include "runtime/engine/device_engine.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::cuda::testing {

class DeviceTestEngine {
 public:
  explicit DeviceTestEngine(int32_t blocks) : blocks_(blocks) {}
  ~DeviceTestEngine();
  DeviceTestEngine(const DeviceTestEngine&) = delete;
  DeviceTestEngine& operator=(const DeviceTestEngine&) = delete;

  absl::Status Start(const engine::DeviceEngineOptions& options);
  engine::ModelEngine* engine() const { return engine_.get(); }
  // After Start: the engine's models (owned by the engine; null where it has none).
  CudaTransformer* target_model() const { return target_model_; }
  CudaTransformer* mtp_model() const { return mtp_model_; }

 private:
  const int32_t blocks_;
  std::unique_ptr<CudaEngineBuilder> builder_;
  std::byte* target_ = nullptr;
  size_t target_bytes_ = 0;
  std::byte* draft_ = nullptr;
  size_t draft_bytes_ = 0;
  std::unique_ptr<engine::ModelEngine> engine_;
  CudaTransformer* target_model_ = nullptr;
  CudaTransformer* mtp_model_ = nullptr;
};

}  // namespace lockstep::cuda::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_TEST_ENGINE_H_

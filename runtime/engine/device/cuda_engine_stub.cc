// StartCudaEngine of a binary built without CUDA (the default build): `engine: cuda`
// fails at start and says why.
#include "runtime/engine/device/cuda_support.h"
#include "runtime/engine/device_engine.h"

namespace lockstep::engine {

absl::StatusOr<std::unique_ptr<DeviceEngineBuilder>> StartCudaEngine(
    const DeviceEngineOptions& /*options*/) {
  return CudaEngineSupport();
}

}  // namespace lockstep::engine

#include "runtime/cuda/gpu_test_env.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string_view>

#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda::testing {

absl::Status DeviceAvailable() {
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count), "no usable CUDA device"); !s.ok()) {
    cudaGetLastError();
    return s;
  }
  if (count == 0) return absl::UnavailableError("no CUDA device is visible");
  return CudaStatus(cudaSetDevice(0), "CUDA device 0");
}

bool GpuRequired() {
#ifdef LOCKSTEP_CUDA_CPU
  return true;  // the CPU execution layer's device is always there
#else
  const char* value = std::getenv("LOCKSTEP_REQUIRE_GPU");
  return value != nullptr && std::string_view(value) == "1";
#endif
}

}  // namespace lockstep::cuda::testing

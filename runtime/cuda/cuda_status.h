// CUDA runtime errors as absl::Status. The only place that maps cudaError_t codes:
// cudaErrorMemoryAllocation is ResourceExhausted, no device or driver is Unavailable,
// anything else Internal. Each message names what was attempted and CUDA's own words.
#ifndef LOCKSTEP_RUNTIME_CUDA_CUDA_STATUS_H_
#define LOCKSTEP_RUNTIME_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda {

// OK for cudaSuccess; otherwise "<what>: <cudaGetErrorName>: <cudaGetErrorString>".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_CUDA_STATUS_H_

// Launchers of on-device sampling: argmax, and top-k / top-p sampling with the CPU
// sampler's counter-based draw (common/splitmix64.h CounterUniform01, purpose kToken), so
// the same logits and (seed, position) give the same token as SampleToken
// (runtime/engine/cpu/sampler.h) after its logit processing. The device path takes rows with
// 0 < top_k <= kMaxDeviceTopK (or greedy); others stay on the host sampler.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_SAMPLING_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_SAMPLING_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep::cuda::kernels {

inline constexpr int kMaxDeviceTopK = 256;
// DrawPurpose::kToken of runtime/engine/cpu/sampler.h.
inline constexpr uint64_t kTokenDrawPurpose = 1;

// Per-row parameters (device memory). temperature 0: greedy.
struct SampleRowParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int64_t position = 0;
};

// tokens[r] = the highest logit of row r (ties: lowest id).
cudaError_t LaunchArgMax(const float* logits, int rows, int vocab, int32_t* tokens,
                         cudaStream_t stream);

// tokens[r] = SampleToken's choice for row r under params[r]; a row with top_k outside
// (0, kMaxDeviceTopK] (and temperature > 0) gets -1 (sample it on the host).
cudaError_t LaunchSampleTopKTopP(const float* logits, int rows, int vocab,
                                 const SampleRowParams* params, int32_t* tokens,
                                 cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_SAMPLING_KERNELS_H_

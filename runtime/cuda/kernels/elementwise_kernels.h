// Launchers of the per-token kernels of a transformer layer: RMSNorm with the residual
// add fused in, per-head RMSNorm of q and k (qwen3), rotary embedding (rotate-half) and
// SiLU·mul, the bias add of a projection, and an elementwise add (the shared experts').
// bf16 (or f32: the engine's f32 mode) storage, fp32 math in the CPU engine's order of
// operations (runtime/engine/cpu/ops.h).
// Raw device pointers and a stream; each returns the launch's error (cudaSuccess when
// enqueued). Row strides are in elements.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_ELEMENTWISE_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

// For each of `rows` rows of `n`: when `residual` is not null, residual = x + residual
// (stored in the element type) and h = residual, else h = x; out = h / sqrt(mean(h^2) + eps) *
// weight. `out` may alias `x`.
cudaError_t LaunchAddRmsNorm(const Bf16* x, Bf16* residual, const Bf16* weight, int rows, int n,
                             float eps, Bf16* out, cudaStream_t stream);
cudaError_t LaunchAddRmsNorm(const float* x, float* residual, const float* weight, int rows, int n,
                             float eps, float* out, cudaStream_t stream);

// In place: each of `heads` vectors of `head_dim` at x + t * row_stride + h * head_dim,
// t < tokens, is RMS-normalised with the shared `weight` [head_dim].
cudaError_t LaunchHeadRmsNorm(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                              const Bf16* weight, float eps, cudaStream_t stream);
cudaError_t LaunchHeadRmsNorm(float* x, int64_t row_stride, int tokens, int heads, int head_dim,
                              const float* weight, float eps, cudaStream_t stream);

// In place: rotates the `heads` vectors of token t (layout as LaunchHeadRmsNorm) by the
// angles positions[t] * inv_freq[i] (i < head_dim / 2, pairs i and i + head_dim / 2).
// inv_freq is device memory of head_dim / 2 doubles (the model config's theta and
// scaling); angles and their cos/sin are computed in double, as RopeAngles does.
cudaError_t LaunchRope(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                       const int32_t* positions, const double* inv_freq, cudaStream_t stream);
cudaError_t LaunchRope(float* x, int64_t row_stride, int tokens, int heads, int head_dim,
                       const int32_t* positions, const double* inv_freq, cudaStream_t stream);

// out[r][i] = silu(gate[r][i]) * up[r][i] for i < n; rows of gate/up `in_stride` apart,
// rows of out `out_stride` apart.
cudaError_t LaunchSiluMul(const Bf16* gate, const Bf16* up, int64_t in_stride, int rows, int n,
                          Bf16* out, int64_t out_stride, cudaStream_t stream);
cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t in_stride, int rows, int n,
                          float* out, int64_t out_stride, cudaStream_t stream);

// In place: y[r][i] += bias[i] for i < n (rows `row_stride` apart).
cudaError_t LaunchAddBias(Bf16* y, int64_t row_stride, int rows, int n, const Bf16* bias,
                          cudaStream_t stream);
cudaError_t LaunchAddBias(float* y, int64_t row_stride, int rows, int n, const float* bias,
                          cudaStream_t stream);

// In place: y[i] += x[i] for i < n (f32 sums rounded to the element type).
cudaError_t LaunchAdd(Bf16* y, const Bf16* x, int64_t n, cudaStream_t stream);
cudaError_t LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_ELEMENTWISE_KERNELS_H_

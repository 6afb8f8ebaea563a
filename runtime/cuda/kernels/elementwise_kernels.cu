#include "runtime/cuda/kernels/elementwise_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/kernels/device_util.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kNormThreads = 256;
constexpr int kThreads = 256;

// One CTA per row.
__global__ void AddRmsNormKernel(const Bf16* x, Bf16* residual, const Bf16* weight, int n,
                                 float eps, Bf16* out) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float h = LoadBf16(x + base + i);
    if (residual != nullptr) {
      // The stored (bf16) sum is the residual stream and the norm's input.
      h = __bfloat162float(__float2bfloat16_rn(h + LoadBf16(residual + base + i)));
      StoreBf16(residual + base + i, h);
    }
    sum_squares = fmaf(h, h, sum_squares);
  }
  const float mean_square = BlockSum(sum_squares, scratch) / static_cast<float>(n);
  const float scale = 1.0f / sqrtf(mean_square + eps);
  const Bf16* in = residual != nullptr ? residual : x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    // Each thread reads back only the elements it wrote itself.
    StoreBf16(out + base + i, (LoadBf16(in + base + i) * scale) * LoadBf16(weight + i));
  }
}

// One warp per (token, head) vector.
__global__ void HeadRmsNormKernel(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                                  const Bf16* weight, float eps) {
  const int warps = blockDim.x / 32;
  const int64_t vec = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  if (vec >= static_cast<int64_t>(tokens) * heads) return;
  Bf16* v = x + (vec / heads) * row_stride + (vec % heads) * head_dim;
  const int lane = threadIdx.x % 32;
  float sum_squares = 0.0f;
  for (int i = lane; i < head_dim; i += 32) {
    const float h = LoadBf16(v + i);
    sum_squares = fmaf(h, h, sum_squares);
  }
  const float mean_square = WarpSum(sum_squares) / static_cast<float>(head_dim);
  const float scale = 1.0f / sqrtf(mean_square + eps);
  for (int i = lane; i < head_dim; i += 32) {
    StoreBf16(v + i, (LoadBf16(v + i) * scale) * LoadBf16(weight + i));
  }
}

// One CTA per token; threads over (head, pair).
__global__ void RopeKernel(Bf16* x, int64_t row_stride, int heads, int head_dim,
                           const int32_t* positions, const double* inv_freq) {
  const int half = head_dim / 2;
  const int token = blockIdx.x;
  const double position = static_cast<double>(positions[token]);
  Bf16* row = x + token * row_stride;
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half;
    const int i = idx % half;
    double s = 0.0;
    double c = 0.0;
    sincos(position * inv_freq[i], &s, &c);
    const float cos_f = static_cast<float>(c);
    const float sin_f = static_cast<float>(s);
    Bf16* v = row + h * head_dim;
    const float x1 = LoadBf16(v + i);
    const float x2 = LoadBf16(v + i + half);
    StoreBf16(v + i, x1 * cos_f - x2 * sin_f);
    StoreBf16(v + i + half, x2 * cos_f + x1 * sin_f);
  }
}

__global__ void SiluMulKernel(const Bf16* gate, const Bf16* up, int64_t in_stride, int n, Bf16* out,
                              int64_t out_stride) {
  const int64_t row = blockIdx.x;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < n; i += gridDim.y * blockDim.x) {
    const float g = LoadBf16(gate + row * in_stride + i);
    const float u = LoadBf16(up + row * in_stride + i);
    StoreBf16(out + row * out_stride + i, g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

cudaError_t LaunchAddRmsNorm(const Bf16* x, Bf16* residual, const Bf16* weight, int rows, int n,
                             float eps, Bf16* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  AddRmsNormKernel<<<rows, kNormThreads, 0, stream>>>(x, residual, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t LaunchHeadRmsNorm(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                              const Bf16* weight, float eps, cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0 || head_dim <= 0) return cudaSuccess;
  const int64_t vectors = static_cast<int64_t>(tokens) * heads;
  const int warps = kThreads / 32;
  HeadRmsNormKernel<<<static_cast<unsigned>((vectors + warps - 1) / warps), kThreads, 0, stream>>>(
      x, row_stride, tokens, heads, head_dim, weight, eps);
  return cudaGetLastError();
}

cudaError_t LaunchRope(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                       const int32_t* positions, const double* inv_freq, cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0 || head_dim < 2) return cudaSuccess;
  RopeKernel<<<tokens, kThreads, 0, stream>>>(x, row_stride, heads, head_dim, positions, inv_freq);
  return cudaGetLastError();
}

cudaError_t LaunchSiluMul(const Bf16* gate, const Bf16* up, int64_t in_stride, int rows, int n,
                          Bf16* out, int64_t out_stride, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int blocks_y = (n + kThreads - 1) / kThreads < 64 ? (n + kThreads - 1) / kThreads : 64;
  SiluMulKernel<<<dim3(rows, blocks_y), kThreads, 0, stream>>>(gate, up, in_stride, n, out,
                                                               out_stride);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels

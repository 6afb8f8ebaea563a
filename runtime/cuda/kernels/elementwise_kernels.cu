#include "runtime/cuda/kernels/elementwise_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kNormThreads = 256;
constexpr int kThreads = 256;

// One CTA per row.
template <typename T>
__global__ void AddRmsNormKernel(const T* x, T* residual, const T* weight, int n, float eps,
                                 T* out) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float h = Load(x + base + i);
    if (residual != nullptr) {
      // The stored sum is the residual stream and the norm's input.
      h = Round<T>(h + Load(residual + base + i));
      Store(residual + base + i, h);
    }
    sum_squares = fmaf(h, h, sum_squares);
  }
  const float mean_square = BlockSum(sum_squares, scratch) / static_cast<float>(n);
  const float scale = 1.0f / sqrtf(mean_square + eps);
  const T* in = residual != nullptr ? residual : x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    // Each thread reads back only the elements it wrote itself.
    Store(out + base + i, (Load(in + base + i) * scale) * Load(weight + i));
  }
}

// One warp per (token, head) vector.
template <typename T>
__global__ void HeadRmsNormKernel(T* x, int64_t row_stride, int tokens, int heads, int head_dim,
                                  const T* weight, float eps) {
  const int warps = blockDim.x / 32;
  const int64_t vec = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  if (vec >= static_cast<int64_t>(tokens) * heads) return;
  T* v = x + (vec / heads) * row_stride + (vec % heads) * head_dim;
  const int lane = threadIdx.x % 32;
  float sum_squares = 0.0f;
  for (int i = lane; i < head_dim; i += 32) {
    const float h = Load(v + i);
    sum_squares = fmaf(h, h, sum_squares);
  }
  const float mean_square = WarpSum(sum_squares) / static_cast<float>(head_dim);
  const float scale = 1.0f / sqrtf(mean_square + eps);
  for (int i = lane; i < head_dim; i += 32) {
    Store(v + i, (Load(v + i) * scale) * Load(weight + i));
  }
}

// One CTA per token; threads over (head, pair).
template <typename T>
__global__ void RopeKernel(T* x, int64_t row_stride, int heads, int head_dim,
                           const int32_t* positions, const double* inv_freq) {
  const int half = head_dim / 2;
  const int token = blockIdx.x;
  const double position = static_cast<double>(positions[token]);
  T* row = x + token * row_stride;
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half;
    const int i = idx % half;
    double s = 0.0;
    double c = 0.0;
    sincos(position * inv_freq[i], &s, &c);
    const float cos_f = static_cast<float>(c);
    const float sin_f = static_cast<float>(s);
    T* v = row + h * head_dim;
    const float x1 = Load(v + i);
    const float x2 = Load(v + i + half);
    Store(v + i, x1 * cos_f - x2 * sin_f);
    Store(v + i + half, x2 * cos_f + x1 * sin_f);
  }
}

template <typename T>
__global__ void SiluMulKernel(const T* gate, const T* up, int64_t in_stride, int n, T* out,
                              int64_t out_stride) {
  const int64_t row = blockIdx.x;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < n; i += gridDim.y * blockDim.x) {
    const float g = Load(gate + row * in_stride + i);
    const float u = Load(up + row * in_stride + i);
    Store(out + row * out_stride + i, g / (1.0f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void AddBiasKernel(T* y, int64_t row_stride, int n, const T* bias) {
  const int64_t row = blockIdx.x;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < n; i += gridDim.y * blockDim.x) {
    Store(y + row * row_stride + i, Load(y + row * row_stride + i) + Load(bias + i));
  }
}

template <typename T>
__global__ void AddKernel(T* y, const T* x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(y + i, Load(y + i) + Load(x + i));
  }
}

// CTAs in y for `n` columns of a row-wise kernel.
int ColumnBlocks(int n) {
  const int blocks = (n + kThreads - 1) / kThreads;
  return blocks < 64 ? blocks : 64;
}

template <typename T>
cudaError_t AddRmsNorm(const T* x, T* residual, const T* weight, int rows, int n, float eps,
                       T* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(AddRmsNormKernel<T>, rows, kNormThreads, 0, stream)
  (x, residual, weight, n, eps, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t HeadRmsNorm(T* x, int64_t row_stride, int tokens, int heads, int head_dim,
                        const T* weight, float eps, cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0 || head_dim <= 0) return cudaSuccess;
  const int64_t vectors = static_cast<int64_t>(tokens) * heads;
  const int warps = kThreads / 32;
  LOCKSTEP_LAUNCH(HeadRmsNormKernel<T>, static_cast<unsigned>((vectors + warps - 1) / warps),
                  kThreads, 0, stream)
  (x, row_stride, tokens, heads, head_dim, weight, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Rope(T* x, int64_t row_stride, int tokens, int heads, int head_dim,
                 const int32_t* positions, const double* inv_freq, cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0 || head_dim < 2) return cudaSuccess;
  LOCKSTEP_LAUNCH(RopeKernel<T>, tokens, kThreads, 0, stream)
  (x, row_stride, heads, head_dim, positions, inv_freq);
  return cudaGetLastError();
}

template <typename T>
cudaError_t SiluMul(const T* gate, const T* up, int64_t in_stride, int rows, int n, T* out,
                    int64_t out_stride, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(SiluMulKernel<T>, dim3(rows, ColumnBlocks(n)), kThreads, 0, stream)
  (gate, up, in_stride, n, out, out_stride);
  return cudaGetLastError();
}

template <typename T>
cudaError_t AddBias(T* y, int64_t row_stride, int rows, int n, const T* bias,
                    cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(AddBiasKernel<T>, dim3(rows, ColumnBlocks(n)), kThreads, 0, stream)
  (y, row_stride, n, bias);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Add(T* y, const T* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  LOCKSTEP_LAUNCH(AddKernel<T>, static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kThreads, 0,
                  stream)
  (y, x, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAdd(Bf16* y, const Bf16* x, int64_t n, cudaStream_t stream) {
  return Add(y, x, n, stream);
}
cudaError_t LaunchAdd(float* y, const float* x, int64_t n, cudaStream_t stream) {
  return Add(y, x, n, stream);
}

cudaError_t LaunchAddRmsNorm(const Bf16* x, Bf16* residual, const Bf16* weight, int rows, int n,
                             float eps, Bf16* out, cudaStream_t stream) {
  return AddRmsNorm(x, residual, weight, rows, n, eps, out, stream);
}
cudaError_t LaunchAddRmsNorm(const float* x, float* residual, const float* weight, int rows, int n,
                             float eps, float* out, cudaStream_t stream) {
  return AddRmsNorm(x, residual, weight, rows, n, eps, out, stream);
}

cudaError_t LaunchHeadRmsNorm(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                              const Bf16* weight, float eps, cudaStream_t stream) {
  return HeadRmsNorm(x, row_stride, tokens, heads, head_dim, weight, eps, stream);
}
cudaError_t LaunchHeadRmsNorm(float* x, int64_t row_stride, int tokens, int heads, int head_dim,
                              const float* weight, float eps, cudaStream_t stream) {
  return HeadRmsNorm(x, row_stride, tokens, heads, head_dim, weight, eps, stream);
}

cudaError_t LaunchRope(Bf16* x, int64_t row_stride, int tokens, int heads, int head_dim,
                       const int32_t* positions, const double* inv_freq, cudaStream_t stream) {
  return Rope(x, row_stride, tokens, heads, head_dim, positions, inv_freq, stream);
}
cudaError_t LaunchRope(float* x, int64_t row_stride, int tokens, int heads, int head_dim,
                       const int32_t* positions, const double* inv_freq, cudaStream_t stream) {
  return Rope(x, row_stride, tokens, heads, head_dim, positions, inv_freq, stream);
}

cudaError_t LaunchSiluMul(const Bf16* gate, const Bf16* up, int64_t in_stride, int rows, int n,
                          Bf16* out, int64_t out_stride, cudaStream_t stream) {
  return SiluMul(gate, up, in_stride, rows, n, out, out_stride, stream);
}
cudaError_t LaunchSiluMul(const float* gate, const float* up, int64_t in_stride, int rows, int n,
                          float* out, int64_t out_stride, cudaStream_t stream) {
  return SiluMul(gate, up, in_stride, rows, n, out, out_stride, stream);
}

cudaError_t LaunchAddBias(Bf16* y, int64_t row_stride, int rows, int n, const Bf16* bias,
                          cudaStream_t stream) {
  return AddBias(y, row_stride, rows, n, bias, stream);
}
cudaError_t LaunchAddBias(float* y, int64_t row_stride, int rows, int n, const float* bias,
                          cudaStream_t stream) {
  return AddBias(y, row_stride, rows, n, bias, stream);
}

}  // namespace lockstep::cuda::kernels

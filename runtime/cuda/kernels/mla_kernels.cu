#include "runtime/cuda/kernels/mla_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"
#include "runtime/cuda/kernels/paged_kv.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = kThreads;  // positions scored per round of the attention kernel

bool ValidShape(const MlaShape& s) {
  return s.heads > 0 && s.nope > 0 && s.rope > 0 && s.rope % 2 == 0 && s.lora > 0 && s.vdim > 0 &&
         2 * s.half >= s.lora + s.rope && s.latent() <= kMaxMlaLatent;
}

// One CTA per token; threads over (head, pair).
template <typename T>
__global__ void RopeInterleavedKernel(T* x, int64_t row_stride, int heads, int64_t head_stride,
                                      int dim, const int32_t* positions, const double* inv_freq,
                                      float magnitude) {
  const int half = dim / 2;
  const int token = blockIdx.x;
  const double position = static_cast<double>(positions[token]);
  T* row = x + token * row_stride;
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half;
    const int i = idx % half;
    double s = 0.0;
    double c = 0.0;
    sincos(position * inv_freq[i], &s, &c);
    const float cos_f = static_cast<float>(c) * magnitude;
    const float sin_f = static_cast<float>(s) * magnitude;
    T* v = row + h * head_stride + 2 * i;
    const float x1 = Load(v);
    const float x2 = Load(v + 1);
    Store(v, x1 * cos_f - x2 * sin_f);
    Store(v + 1, x2 * cos_f + x1 * sin_f);
  }
}

// One CTA per (row, head); threads over the latent vector's part past lora.
template <typename T>
__global__ void QueryPeKernel(const T* q, int64_t q_stride, MlaShape s, float* q_lat) {
  const int row = blockIdx.x;
  const int h = blockIdx.y;
  const T* qh = q + row * q_stride + static_cast<int64_t>(h) * (s.nope + s.rope);
  float* out = q_lat + (static_cast<int64_t>(row) * s.heads + h) * (2 * s.half);
  for (int j = s.lora + threadIdx.x; j < (2 * s.half); j += blockDim.x) {
    out[j] = j < s.lora + s.rope ? Load(qh + s.nope + (j - s.lora)) : 0.0f;
  }
}

// The latent value `j` of `position`: K plane below half, V plane from it.
template <typename T>
__device__ __forceinline__ float Latent(const PagedKvDesc& d, int layer, int32_t seq,
                                        int32_t position, int half, int j) {
  return j < half ? Load(KvRow<T>(d, layer, 0, 0, seq, position) + j)
                  : Load(KvRow<T>(d, layer, 1, 0, seq, position) + (j - half));
}

// One CTA per (row, head): rounds of kTile positions, each thread scoring one position,
// with the online softmax's running max and sum; each thread owns acc[j] for
// j = threadIdx.x + i * blockDim.x. The cache holds T, the output is Out (f32 sums
// rounded once at the end for bf16).
template <typename T, typename Out>
__global__ void MlaAttentionKernel(PagedKvDesc d, int layer, const float* q_lat, MlaShape s,
                                   const int32_t* seqs, const int32_t* positions, float scale,
                                   Out* acc_out) {
  __shared__ float q_s[kMaxMlaLatent];
  __shared__ float acc_s[kMaxMlaLatent];
  __shared__ float p_s[kTile];
  __shared__ float scratch[32];
  __shared__ float max_s;
  const int row = blockIdx.x;
  const int h = blockIdx.y;
  Out* out = acc_out + (static_cast<int64_t>(row) * s.heads + h) * s.lora;
  const int32_t seq = seqs[row];
  if (seq < 0) {  // a pad row
    for (int j = threadIdx.x; j < s.lora; j += blockDim.x) Store(out + j, 0.0f);
    return;
  }
  const float* q = q_lat + (static_cast<int64_t>(row) * s.heads + h) * (2 * s.half);
  for (int j = threadIdx.x; j < (2 * s.half); j += blockDim.x) q_s[j] = q[j];
  for (int j = threadIdx.x; j < s.lora; j += blockDim.x) acc_s[j] = 0.0f;
  __syncthreads();
  const int count = positions[row] + 1;
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  for (int t0 = 0; t0 < count; t0 += kTile) {
    const int n = count - t0 < kTile ? count - t0 : kTile;
    float score = -INFINITY;
    if (threadIdx.x < n) {
      const int32_t t = t0 + threadIdx.x;
      const T* first = KvRow<T>(d, layer, 0, 0, seq, t);
      const T* second = KvRow<T>(d, layer, 1, 0, seq, t);
      float a = 0.0f;
      float b = 0.0f;
      for (int j = 0; j < s.half; ++j) a = fmaf(q_s[j], Load(first + j), a);
      for (int j = 0; j < s.half; ++j) b = fmaf(q_s[s.half + j], Load(second + j), b);
      score = (a + b) * scale;
    }
    // The running max over the tile: the scores through shared memory, thread 0 reduces.
    p_s[threadIdx.x] = score;
    __syncthreads();
    if (threadIdx.x == 0) {
      float m = running_max;
      for (int i = 0; i < n; ++i) m = fmaxf(m, p_s[i]);
      max_s = m;
    }
    __syncthreads();
    const float new_max = max_s;
    const float correction = expf(running_max - new_max);
    const float p = threadIdx.x < n ? expf(score - new_max) : 0.0f;
    __syncthreads();
    p_s[threadIdx.x] = p;
    running_sum = running_sum * correction + BlockSum(p, scratch);
    running_max = new_max;
    // BlockSum's syncs made p_s visible.
    for (int j = threadIdx.x; j < s.lora; j += blockDim.x) {
      float v = acc_s[j] * correction;
      for (int i = 0; i < n; ++i) v = fmaf(p_s[i], Latent<T>(d, layer, seq, t0 + i, s.half, j), v);
      acc_s[j] = v;
    }
    __syncthreads();
  }
  const float inv = 1.0f / running_sum;
  for (int j = threadIdx.x; j < s.lora; j += blockDim.x) Store(out + j, acc_s[j] * inv);
}

template <typename T>
cudaError_t RopeInterleaved(T* x, int64_t row_stride, int tokens, int heads, int64_t head_stride,
                            int dim, const int32_t* positions, const double* inv_freq,
                            float magnitude, cudaStream_t stream) {
  if (dim % 2 != 0) return cudaErrorInvalidValue;
  if (tokens <= 0 || heads <= 0 || dim < 2) return cudaSuccess;
  LOCKSTEP_LAUNCH(RopeInterleavedKernel<T>, tokens, kThreads, 0, stream)
  (x, row_stride, heads, head_stride, dim, positions, inv_freq, magnitude);
  return cudaGetLastError();
}

template <typename T>
cudaError_t QueryPe(const T* q, int64_t q_stride, int rows, const MlaShape& shape, float* q_lat,
                    cudaStream_t stream) {
  if (!ValidShape(shape)) return cudaErrorInvalidValue;
  if (rows <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(QueryPeKernel<T>, dim3(rows, shape.heads), kThreads, 0, stream)
  (q, q_stride, shape, q_lat);
  return cudaGetLastError();
}

template <typename T, typename Out>
cudaError_t MlaAttentionOf(const PagedKvDesc& kv, int layer, const float* q_lat,
                           const MlaShape& shape, const int32_t* seqs, const int32_t* positions,
                           int rows, float scale, Out* acc, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  // One name for the macro (a template argument list's comma would split it).
  const auto kernel = MlaAttentionKernel<T, Out>;
  LOCKSTEP_LAUNCH(kernel, dim3(rows, shape.heads), kThreads, 0, stream)
  (kv, layer, q_lat, shape, seqs, positions, scale, acc);
  return cudaGetLastError();
}

template <typename Out>
cudaError_t MlaAttentionTo(const PagedKvDesc& kv, int layer, const float* q_lat,
                           const MlaShape& shape, const int32_t* seqs, const int32_t* positions,
                           int rows, float scale, Out* acc, cudaStream_t stream) {
  if (!ValidShape(shape) || kv.num_kv_heads != 1 || kv.head_dim != shape.half ||
      (kv.element_bytes != 2 && kv.element_bytes != 4)) {
    return cudaErrorInvalidValue;
  }
  return kv.element_bytes == 4 ? MlaAttentionOf<float>(kv, layer, q_lat, shape, seqs, positions,
                                                       rows, scale, acc, stream)
                               : MlaAttentionOf<Bf16>(kv, layer, q_lat, shape, seqs, positions,
                                                      rows, scale, acc, stream);
}

}  // namespace

cudaError_t LaunchRopeInterleaved(Bf16* x, int64_t row_stride, int tokens, int heads,
                                  int64_t head_stride, int dim, const int32_t* positions,
                                  const double* inv_freq, float magnitude, cudaStream_t stream) {
  return RopeInterleaved(x, row_stride, tokens, heads, head_stride, dim, positions, inv_freq,
                         magnitude, stream);
}
cudaError_t LaunchRopeInterleaved(float* x, int64_t row_stride, int tokens, int heads,
                                  int64_t head_stride, int dim, const int32_t* positions,
                                  const double* inv_freq, float magnitude, cudaStream_t stream) {
  return RopeInterleaved(x, row_stride, tokens, heads, head_stride, dim, positions, inv_freq,
                         magnitude, stream);
}

cudaError_t LaunchMlaQueryPe(const Bf16* q, int64_t q_stride, int rows, const MlaShape& shape,
                             float* q_lat, cudaStream_t stream) {
  return QueryPe(q, q_stride, rows, shape, q_lat, stream);
}
cudaError_t LaunchMlaQueryPe(const float* q, int64_t q_stride, int rows, const MlaShape& shape,
                             float* q_lat, cudaStream_t stream) {
  return QueryPe(q, q_stride, rows, shape, q_lat, stream);
}

cudaError_t LaunchMlaAttention(const PagedKvDesc& kv, int layer, const float* q_lat,
                               const MlaShape& shape, const int32_t* seqs,
                               const int32_t* positions, int rows, float scale, float* acc,
                               cudaStream_t stream) {
  return MlaAttentionTo(kv, layer, q_lat, shape, seqs, positions, rows, scale, acc, stream);
}
cudaError_t LaunchMlaAttention(const PagedKvDesc& kv, int layer, const float* q_lat,
                               const MlaShape& shape, const int32_t* seqs, const int32_t* positions,
                               int rows, float scale, Bf16* acc, cudaStream_t stream) {
  return MlaAttentionTo(kv, layer, q_lat, shape, seqs, positions, rows, scale, acc, stream);
}

}  // namespace lockstep::cuda::kernels

#include "runtime/cuda/kernels/decode_attention_kernel.h"

#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"
#include "runtime/cuda/kernels/paged_kv.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 32;  // tokens per K/V tile in shared memory

// Shared memory: q[group][hd], k[kTile][hd + 1] (padded: the score loop reads a column
// of it, one row per thread), v[kTile][hd], s[group][kTile], acc[group][hd], m[group],
// l[group], alpha[group].
size_t SplitSharedBytes(int group, int head_dim) {
  return sizeof(float) * (static_cast<size_t>(group) * head_dim * 2 +
                          static_cast<size_t>(kTile) * (2 * head_dim + 1) +
                          static_cast<size_t>(group) * kTile + 3 * group);
}

// grid (work item, kv head). Writes the split's normalized output and its log-sum-exp
// for each query head of the group to the scratch slot of the split. T: the element
// type of q, out and the pool.
template <typename T>
__global__ void DecodeSplitKernel(DecodeAttentionArgs args) {
  LOCKSTEP_EXTERN_SHARED(float, smem);
  const DecodeWorkItem item = args.items[blockIdx.x];
  if (item.row < 0) return;  // an unused item of a graph's static grid
  const DecodeRowDesc row = args.rows[item.row];
  const int kv_head = blockIdx.y;
  const int hd = args.kv.head_dim;
  const int group = args.num_heads / args.kv.num_kv_heads;
  float* q_s = smem;
  float* k_s = q_s + group * hd;
  const int k_stride = hd + 1;
  float* v_s = k_s + kTile * k_stride;
  float* s_s = v_s + kTile * hd;
  float* acc = s_s + group * kTile;
  float* m_s = acc + group * hd;
  float* l_s = m_s + group;
  float* alpha_s = l_s + group;

  const T* q =
      static_cast<const T*>(args.q) + row.qo_row * args.q_row_stride + kv_head * group * hd;
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    q_s[i] = Load(q + i);
    acc[i] = 0.0f;
  }
  for (int j = threadIdx.x; j < group; j += blockDim.x) {
    m_s[j] = -INFINITY;
    l_s[j] = 0.0f;
  }
  const int32_t begin = item.split * row.split_tokens;
  const int32_t end = min(row.context_len, begin + row.split_tokens);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  for (int32_t t0 = begin; t0 < end; t0 += kTile) {
    const int count = min(kTile, end - t0);
    __syncthreads();  // the previous tile is consumed
    LoadKvTile<T>(args.kv, args.layer, kv_head, row.seq, t0, count, k_s, k_stride, v_s);
    __syncthreads();
    for (int p = threadIdx.x; p < group * count; p += blockDim.x) {
      const int j = p / count;
      const int t = p % count;
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot = fmaf(q_s[j * hd + d], k_s[t * k_stride + d], dot);
      s_s[j * kTile + t] = dot * args.scale;
    }
    __syncthreads();
    // Online softmax: one warp per query head.
    for (int j = warp; j < group; j += blockDim.x / 32) {
      const float s = lane < count ? s_s[j * kTile + lane] : -INFINITY;
      const float m_old = m_s[j];
      const float m_new = fmaxf(m_old, WarpMax(s));
      const float p = lane < count ? expf(s - m_new) : 0.0f;
      if (lane < count) s_s[j * kTile + lane] = p;
      const float sum = WarpSum(p);
      if (lane == 0) {
        const float alpha = expf(m_old - m_new);  // 0 for the first tile (m_old = -inf)
        alpha_s[j] = alpha;
        l_s[j] = l_s[j] * alpha + sum;
        m_s[j] = m_new;
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < group * hd; idx += blockDim.x) {
      const int j = idx / hd;
      const int d = idx % hd;
      float a = acc[idx] * alpha_s[j];
      for (int t = 0; t < count; ++t) a = fmaf(s_s[j * kTile + t], v_s[t * hd + d], a);
      acc[idx] = a;
    }
  }
  __syncthreads();
  const int64_t slot = row.split_begin + item.split;
  float* out = args.scratch + (slot * args.num_heads + kv_head * group) * hd;
  for (int idx = threadIdx.x; idx < group * hd; idx += blockDim.x) {
    out[idx] = acc[idx] / l_s[idx / hd];
  }
  float* lse = args.scratch + static_cast<int64_t>(args.num_items) * args.num_heads * hd +
               slot * args.num_heads + kv_head * group;
  for (int j = threadIdx.x; j < group; j += blockDim.x) lse[j] = m_s[j] + logf(l_s[j]);
}

// grid (row, query head): out = sum_s exp(lse_s - max) * o_s / sum_s exp(lse_s - max).
template <typename T>
__global__ void DecodeMergeKernel(DecodeAttentionArgs args) {
  const DecodeRowDesc row = args.rows[blockIdx.x];
  const int head = blockIdx.y;
  const int hd = args.kv.head_dim;
  const float* lse = args.scratch + static_cast<int64_t>(args.num_items) * args.num_heads * hd;
  float max_lse = -INFINITY;
  for (int s = 0; s < row.num_splits; ++s) {
    max_lse = fmaxf(max_lse, lse[(row.split_begin + s) * args.num_heads + head]);
  }
  float total = 0.0f;
  for (int s = 0; s < row.num_splits; ++s) {
    total += expf(lse[(row.split_begin + s) * args.num_heads + head] - max_lse);
  }
  T* out = static_cast<T*>(args.out) + row.qo_row * args.out_row_stride + head * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < row.num_splits; ++s) {
      const int64_t slot = row.split_begin + s;
      const float w = expf(lse[slot * args.num_heads + head] - max_lse);
      sum = fmaf(w, args.scratch[(slot * args.num_heads + head) * hd + d], sum);
    }
    Store(out + d, sum / total);
  }
}

template <typename T>
cudaError_t Launch(const DecodeAttentionArgs& args, cudaStream_t stream) {
  const int kv_heads = args.kv.num_kv_heads;
  const size_t shared = SplitSharedBytes(args.num_heads / kv_heads, args.kv.head_dim);
  if (cudaError_t e = cudaFuncSetAttribute(DecodeSplitKernel<T>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared));
      e != cudaSuccess) {
    return e;
  }
  LOCKSTEP_LAUNCH(DecodeSplitKernel<T>, dim3(args.num_items, kv_heads), kThreads, shared, stream)
  (args);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  LOCKSTEP_LAUNCH(DecodeMergeKernel<T>, dim3(args.num_rows, args.num_heads), kThreads, 0, stream)
  (args);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  const int kv_heads = args.kv.num_kv_heads;
  if (args.kv.head_dim < 1 || args.kv.head_dim > kMaxDecodeHeadDim || kv_heads < 1 ||
      args.num_heads % kv_heads != 0 || args.num_heads / kv_heads > kMaxDecodeGroup ||
      (args.kv.element_bytes != 2 && args.kv.element_bytes != 4)) {
    return cudaErrorInvalidValue;
  }
  if (args.num_rows <= 0 || args.num_items <= 0) return cudaSuccess;
  return args.kv.element_bytes == 4 ? Launch<float>(args, stream) : Launch<Bf16>(args, stream);
}

}  // namespace lockstep::cuda::kernels

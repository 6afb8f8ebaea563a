#include "runtime/cuda/kernels/prefill_attention_kernel.h"

#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"
#include "runtime/cuda/kernels/paged_kv.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kRows = kMaxPrefillTileRows;
constexpr int kTile = 32;  // keys per K/V tile (one per lane in the softmax step)

// Shared memory: q[kRows][hd], acc[kRows][hd], k[kTile][hd + 1] (padded: a warp reads a
// column of it), v[kTile][hd], s[kRows][kTile], m[kRows], l[kRows], alpha[kRows].
size_t SharedBytes(int head_dim) {
  return sizeof(float) * (static_cast<size_t>(kRows) * head_dim * 2 +
                          static_cast<size_t>(kTile) * (2 * head_dim + 1) +
                          static_cast<size_t>(kRows) * kTile + 3 * kRows);
}

// grid (tile, query head). T: the element type of q, out and the pool.
template <typename T>
__global__ void PrefillKernel(PrefillAttentionArgs args) {
  LOCKSTEP_EXTERN_SHARED(float, smem);
  const PrefillTileDesc tile = args.tiles[blockIdx.x];
  const int head = blockIdx.y;
  const int kv_head = head / (args.num_heads / args.kv.num_kv_heads);
  const int hd = args.kv.head_dim;
  const int rows = tile.num_rows;
  if (rows < 1 || rows > kRows) __trap();  // a plan with bigger tiles: fail loudly
  float* q_s = smem;
  float* acc = q_s + kRows * hd;
  float* k_s = acc + kRows * hd;
  const int k_stride = hd + 1;
  float* v_s = k_s + kTile * k_stride;
  float* s_s = v_s + kTile * hd;
  float* m_s = s_s + kRows * kTile;
  float* l_s = m_s + kRows;
  float* alpha_s = l_s + kRows;

  for (int idx = threadIdx.x; idx < rows * hd; idx += blockDim.x) {
    const int r = idx / hd;
    q_s[idx] = Load(static_cast<const T*>(args.q) + (tile.row_begin + r) * args.q_row_stride +
                    head * hd + idx % hd);
    acc[idx] = 0.0f;
  }
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    m_s[r] = -INFINITY;
    l_s[r] = 0.0f;
  }
  const int32_t kv_end = tile.first_position + rows;  // the last row attends to kv_end - 1
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  for (int32_t t0 = 0; t0 < kv_end; t0 += kTile) {
    const int count = min(kTile, kv_end - t0);
    __syncthreads();  // the previous tile is consumed
    LoadKvTile<T>(args.kv, args.layer, kv_head, tile.seq, t0, count, k_s, k_stride, v_s);
    __syncthreads();
    for (int p = threadIdx.x; p < rows * kTile; p += blockDim.x) {
      const int r = p / kTile;
      const int t = p % kTile;
      float score = -INFINITY;
      if (t < count && t0 + t <= tile.first_position + r) {
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot = fmaf(q_s[r * hd + d], k_s[t * k_stride + d], dot);
        score = dot * args.scale;
      }
      s_s[p] = score;
    }
    __syncthreads();
    // Online softmax: one warp per row, one lane per key. Key 0 is in the first tile
    // and every row sees it, so m is finite from the first tile on.
    for (int r = warp; r < rows; r += blockDim.x / 32) {
      const float s = s_s[r * kTile + lane];
      const float m_old = m_s[r];
      const float m_new = fmaxf(m_old, WarpMax(s));
      const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
      s_s[r * kTile + lane] = p;
      const float sum = WarpSum(p);
      if (lane == 0) {
        const float alpha = expf(m_old - m_new);
        alpha_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * hd; idx += blockDim.x) {
      const int r = idx / hd;
      const int d = idx % hd;
      float a = acc[idx] * alpha_s[r];
      for (int t = 0; t < count; ++t) a = fmaf(s_s[r * kTile + t], v_s[t * hd + d], a);
      acc[idx] = a;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * hd; idx += blockDim.x) {
    const int r = idx / hd;
    Store(static_cast<T*>(args.out) + (tile.row_begin + r) * args.out_row_stride + head * hd +
              idx % hd,
          acc[idx] / l_s[r]);
  }
}

template <typename T>
cudaError_t Launch(const PrefillAttentionArgs& args, cudaStream_t stream) {
  const size_t shared = SharedBytes(args.kv.head_dim);
  if (cudaError_t e = cudaFuncSetAttribute(
          PrefillKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
      e != cudaSuccess) {
    return e;
  }
  LOCKSTEP_LAUNCH(PrefillKernel<T>, dim3(args.num_tiles, args.num_heads), kThreads, shared, stream)
  (args);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream) {
  const int kv_heads = args.kv.num_kv_heads;
  if (args.kv.head_dim < 1 || args.kv.head_dim > kMaxPrefillHeadDim || kv_heads < 1 ||
      args.num_heads % kv_heads != 0 || (args.kv.element_bytes != 2 && args.kv.element_bytes != 4)) {
    return cudaErrorInvalidValue;
  }
  if (args.num_tiles <= 0) return cudaSuccess;
  return args.kv.element_bytes == 4 ? Launch<float>(args, stream) : Launch<Bf16>(args, stream);
}

}  // namespace lockstep::cuda::kernels

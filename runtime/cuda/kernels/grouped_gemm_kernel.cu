#include "runtime/cuda/kernels/grouped_gemm_kernel.h"

#include <cuda_runtime.h>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kRows = kGroupedGemmTileRows;
constexpr int kCols = 64;   // output columns per CTA
constexpr int kDepth = 32;  // k per shared-memory step
constexpr int kThreads = 256;
constexpr int kPerThread = kRows * kCols / kThreads;  // outputs per thread (8)

// One thread walks the segments in (group, expert) order and cuts each into tiles.
__global__ void GroupedGemmPlanKernel(const int32_t* counts, int groups, int max_local,
                                      int local_experts, int group_rows, GroupedGemmTile* tiles,
                                      int max_tiles) {
  if (threadIdx.x != 0) return;
  int t = 0;
  for (int g = 0; g < groups; ++g) {
    int32_t begin = g * group_rows;
    for (int j = 0; j < local_experts; ++j) {
      const int32_t count = counts[g * max_local + j];
      for (int32_t r = 0; r < count && t < max_tiles; r += kRows, ++t) {
        tiles[t] = {begin + r, count - r < kRows ? count - r : kRows, j};
      }
      begin += count;
    }
  }
  for (; t < max_tiles; ++t) tiles[t] = {0, 0, -1};
}

// grid (tile, column block). Thread i computes column c = i % kCols of the block for
// rows r = i / kCols + q * (kThreads / kCols), q < kPerThread, each a sequential chain
// of fused multiply-adds over k.
template <typename T>
__global__ void GroupedGemmKernel(const T* x, const GroupedGemmTile* tiles,
                                  const T* const* weights, int n, int k, T* y) {
  const GroupedGemmTile tile = tiles[blockIdx.x];
  if (tile.expert < 0) return;
  __shared__ float x_s[kRows][kDepth];
  __shared__ float w_s[kCols][kDepth + 1];
  const T* w = weights[tile.expert];
  const int col0 = blockIdx.y * kCols;
  const int c = threadIdx.x % kCols;
  const int r0 = threadIdx.x / kCols;
  constexpr int kRowStep = kThreads / kCols;
  float acc[kPerThread];
  for (int q = 0; q < kPerThread; ++q) acc[q] = 0.0f;
  for (int d0 = 0; d0 < k; d0 += kDepth) {
    const int depth = k - d0 < kDepth ? k - d0 : kDepth;
    __syncthreads();  // the previous step is consumed
    for (int idx = threadIdx.x; idx < kRows * kDepth; idx += kThreads) {
      const int r = idx / kDepth;
      const int d = idx % kDepth;
      x_s[r][d] = r < tile.rows && d < depth
                      ? Load(x + static_cast<int64_t>(tile.row_begin + r) * k + d0 + d)
                      : 0.0f;
    }
    for (int idx = threadIdx.x; idx < kCols * kDepth; idx += kThreads) {
      const int cc = idx / kDepth;
      const int d = idx % kDepth;
      w_s[cc][d] = col0 + cc < n && d < depth
                       ? Load(w + static_cast<int64_t>(col0 + cc) * k + d0 + d)
                       : 0.0f;
    }
    __syncthreads();
    for (int q = 0; q < kPerThread; ++q) {
      const int r = r0 + q * kRowStep;
      float a = acc[q];
      for (int d = 0; d < depth; ++d) a = fmaf(x_s[r][d], w_s[c][d], a);
      acc[q] = a;
    }
  }
  if (col0 + c >= n) return;
  for (int q = 0; q < kPerThread; ++q) {
    const int r = r0 + q * kRowStep;
    if (r < tile.rows) Store(y + static_cast<int64_t>(tile.row_begin + r) * n + col0 + c, acc[q]);
  }
}

template <typename T>
cudaError_t GroupedGemm(const T* x, const GroupedGemmTile* tiles, int max_tiles,
                        const T* const* weights, int n, int k, T* y, cudaStream_t stream) {
  if (n < 1 || k < 1 || max_tiles < 0) return cudaErrorInvalidValue;
  if (max_tiles == 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(GroupedGemmKernel<T>, dim3(max_tiles, (n + kCols - 1) / kCols), kThreads, 0,
                  stream)
  (x, tiles, weights, n, k, y);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGroupedGemmPlan(const int32_t* counts, int groups, int max_local,
                                  int local_experts, int group_rows, GroupedGemmTile* tiles,
                                  int max_tiles, cudaStream_t stream) {
  if (groups < 1 || max_local < 1 || local_experts < 1 || local_experts > max_local ||
      group_rows < 0 || max_tiles < 1) {
    return cudaErrorInvalidValue;
  }
  LOCKSTEP_LAUNCH(GroupedGemmPlanKernel, 1, 32, 0, stream)
  (counts, groups, max_local, local_experts, group_rows, tiles, max_tiles);
  return cudaGetLastError();
}

cudaError_t LaunchGroupedGemm(const Bf16* x, const GroupedGemmTile* tiles, int max_tiles,
                              const Bf16* const* weights, int n, int k, Bf16* y,
                              cudaStream_t stream) {
  return GroupedGemm(x, tiles, max_tiles, weights, n, k, y, stream);
}

cudaError_t LaunchGroupedGemm(const float* x, const GroupedGemmTile* tiles, int max_tiles,
                              const float* const* weights, int n, int k, float* y,
                              cudaStream_t stream) {
  return GroupedGemm(x, tiles, max_tiles, weights, n, k, y, stream);
}

}  // namespace lockstep::cuda::kernels

#include "runtime/cuda/kernels/kv_write_kernel.h"

#include <cuda_runtime.h>

#include "runtime/cuda/kernels/paged_kv.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 128;

// One CTA per token; threads over (kv, head, element).
__global__ void WriteKvKernel(PagedKvDesc kv, int layer, const Bf16* k, const Bf16* v,
                              int64_t row_stride, const int32_t* seqs, const int32_t* positions) {
  const int t = blockIdx.x;
  const int32_t seq = seqs[t];
  const int32_t position = positions[t];
  const int per_head = kv.head_dim;
  const int total = 2 * kv.num_kv_heads * per_head;
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int which = idx / (kv.num_kv_heads * per_head);
    const int head = (idx / per_head) % kv.num_kv_heads;
    const int i = idx % per_head;
    const Bf16* src = (which == 0 ? k : v) + t * row_stride + head * per_head + i;
    KvRow(kv, layer, which, head, seq, position)[i] = *src;
  }
}

}  // namespace

cudaError_t LaunchWriteKv(const PagedKvDesc& kv, int layer, const Bf16* k, const Bf16* v,
                          int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                          int tokens, cudaStream_t stream) {
  if (tokens <= 0) return cudaSuccess;
  WriteKvKernel<<<tokens, kThreads, 0, stream>>>(kv, layer, k, v, row_stride, seqs, positions);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels

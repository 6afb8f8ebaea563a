#include "runtime/cuda/kernels/kv_write_kernel.h"

#include <cuda_runtime.h>

#include "runtime/cuda/kernels/launch.h"
#include "runtime/cuda/kernels/paged_kv.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 128;

// One CTA per token; threads over (kv, head, element). A negative sequence is a pad row.
template <typename T>
__global__ void WriteKvKernel(PagedKvDesc kv, int layer, const T* k, const T* v,
                              int64_t row_stride, const int32_t* seqs, const int32_t* positions) {
  const int t = blockIdx.x;
  const int32_t seq = seqs[t];
  if (seq < 0) return;
  const int32_t position = positions[t];
  const int per_head = kv.head_dim;
  const int total = 2 * kv.num_kv_heads * per_head;
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int which = idx / (kv.num_kv_heads * per_head);
    const int head = (idx / per_head) % kv.num_kv_heads;
    const int i = idx % per_head;
    const T* src = (which == 0 ? k : v) + t * row_stride + head * per_head + i;
    KvRow<T>(kv, layer, which, head, seq, position)[i] = *src;
  }
}

template <typename T>
cudaError_t WriteKv(const PagedKvDesc& kv, int layer, const T* k, const T* v, int64_t row_stride,
                    const int32_t* seqs, const int32_t* positions, int tokens,
                    cudaStream_t stream) {
  if (kv.element_bytes != static_cast<int32_t>(sizeof(T))) return cudaErrorInvalidValue;
  if (tokens <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(WriteKvKernel<T>, tokens, kThreads, 0, stream)
  (kv, layer, k, v, row_stride, seqs, positions);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchWriteKv(const PagedKvDesc& kv, int layer, const Bf16* k, const Bf16* v,
                          int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                          int tokens, cudaStream_t stream) {
  return WriteKv(kv, layer, k, v, row_stride, seqs, positions, tokens, stream);
}

cudaError_t LaunchWriteKv(const PagedKvDesc& kv, int layer, const float* k, const float* v,
                          int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                          int tokens, cudaStream_t stream) {
  return WriteKv(kv, layer, k, v, row_stride, seqs, positions, tokens, stream);
}

}  // namespace lockstep::cuda::kernels

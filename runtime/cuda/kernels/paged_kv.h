// Device addressing of the paged KV pool (kv::BlockLayout order) (device code: included by .cu files only).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_

#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

// The head_dim elements of K (kv = 0) or V (kv = 1) of `head` at `position` of `seq`.
__device__ __forceinline__ Bf16* KvRow(const PagedKvDesc& d, int layer, int kv, int head,
                                       int32_t seq, int32_t position) {
  const int64_t block = d.block_table[static_cast<int64_t>(seq) * d.table_stride +
                                      position / d.tokens_per_block];
  const int64_t plane = static_cast<int64_t>(d.tokens_per_block) * d.head_dim;
  const int64_t block_elements = static_cast<int64_t>(d.num_layers) * 2 * d.num_kv_heads * plane;
  const int64_t offset = ((static_cast<int64_t>(layer) * 2 + kv) * d.num_kv_heads + head) * plane +
                         static_cast<int64_t>(position % d.tokens_per_block) * d.head_dim;
  return static_cast<Bf16*>(d.storage) + block * block_elements + offset;
}

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_

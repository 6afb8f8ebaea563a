// Device addressing of the paged KV pool in kv::BlockLayout order (device code: included
// by .cu files only).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_

#include <cuda_bf16.h>

#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/device_util.h"

namespace lockstep::cuda::kernels {

// The head_dim elements (T: Bf16 or float, as d.element_bytes says) of K (kv = 0) or V
// (kv = 1) of `head` at `position` of `seq`: in the sequence's spec buffer from its
// spec_base on, else in the pool.
template <typename T>
__device__ __forceinline__ T* KvRow(const PagedKvDesc& d, int layer, int kv, int head, int32_t seq,
                                    int32_t position) {
  if (d.spec_base != nullptr && position >= d.spec_base[seq]) {
    const int64_t plane = (static_cast<int64_t>(layer) * 2 + kv) * d.num_kv_heads + head;
    return static_cast<T*>(d.spec[seq]) +
           (plane * d.spec_tokens + (position - d.spec_base[seq])) * d.head_dim;
  }
  const int64_t block =
      d.block_table[static_cast<int64_t>(seq) * d.table_stride + position / d.tokens_per_block];
  const int64_t plane = static_cast<int64_t>(d.tokens_per_block) * d.head_dim;
  const int64_t block_elements = static_cast<int64_t>(d.num_layers) * 2 * d.num_kv_heads * plane;
  const int64_t offset = ((static_cast<int64_t>(layer) * 2 + kv) * d.num_kv_heads + head) * plane +
                         static_cast<int64_t>(position % d.tokens_per_block) * d.head_dim;
  return static_cast<T*>(d.storage) + block * block_elements + offset;
}

// Loads K and V of positions [t0, t0 + count) of (layer, kv_head) of `seq` into shared
// memory as f32: k_s[t * k_stride + d], v_s[t * head_dim + d]. 16-byte loads when a row
// is a whole number of 16-byte vectors (head_dim a multiple of 8 for bf16, of 4 for
// f32: block rows are then 16-byte aligned), else element loads. Called by every thread
// of the CTA.
template <typename T>
__device__ __forceinline__ void LoadKvTile(const PagedKvDesc& d, int layer, int kv_head,
                                           int32_t seq, int32_t t0, int count, float* k_s,
                                           int k_stride, float* v_s) {
  const int hd = d.head_dim;
  constexpr int kPerVector = 16 / sizeof(T);
  if (hd % kPerVector == 0) {
    const int vectors = hd / kPerVector;
    for (int idx = threadIdx.x; idx < count * vectors; idx += blockDim.x) {
      const int t = idx / vectors;
      const int c = (idx % vectors) * kPerVector;
      const uint4 k =
          *reinterpret_cast<const uint4*>(KvRow<T>(d, layer, 0, kv_head, seq, t0 + t) + c);
      const uint4 v =
          *reinterpret_cast<const uint4*>(KvRow<T>(d, layer, 1, kv_head, seq, t0 + t) + c);
      const T* k_elements = reinterpret_cast<const T*>(&k);
      const T* v_elements = reinterpret_cast<const T*>(&v);
      for (int i = 0; i < kPerVector; ++i) {
        k_s[t * k_stride + c + i] = Load(k_elements + i);
        v_s[t * hd + c + i] = Load(v_elements + i);
      }
    }
    return;
  }
  for (int idx = threadIdx.x; idx < count * hd; idx += blockDim.x) {
    const int t = idx / hd;
    const int c = idx % hd;
    k_s[t * k_stride + c] = Load(KvRow<T>(d, layer, 0, kv_head, seq, t0 + t) + c);
    v_s[idx] = Load(KvRow<T>(d, layer, 1, kv_head, seq, t0 + t) + c);
  }
}

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PAGED_KV_H_

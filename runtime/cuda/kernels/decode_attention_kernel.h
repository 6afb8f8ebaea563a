// Launcher of paged decode attention (flash-decoding): each query row attends to
// positions [0, context_len) of its sequence through the device block table; its
// context is cut into splits by the host plan (decode_split_plan.h, which depends only
// on the row's own length), a split kernel computes each split's softmax-weighted sum
// with fp32 online softmax for the GQA group of query heads of one KV head (the K/V
// tile is loaded once for the group), and a merge kernel combines the splits by their
// log-sum-exp. K+1 query rows of draft verification are K+1 rows with consecutive
// context lengths.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_ATTENTION_KERNEL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_ATTENTION_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

// The largest head_dim and GQA group the kernel takes: kMaxDecodeHeadDim and
// kMaxDecodeGroup (attention_desc.h).

// Floats of split scratch for `total_splits` splits (plan.total_splits()).
inline size_t DecodeScratchFloats(int total_splits, int num_heads, int head_dim) {
  return static_cast<size_t>(total_splits) * num_heads * (head_dim + 1);
}

// q and out hold elements of the pool's type (kv.element_bytes: bf16 or f32).
struct DecodeAttentionArgs {
  PagedKvDesc kv;
  int layer = 0;
  // Row r of rows: [num_heads][head_dim] at q + rows[r].qo_row * q_row_stride.
  const void* q = nullptr;
  int64_t q_row_stride = 0;
  int num_heads = 1;
  float scale = 1.0f;
  const DecodeRowDesc* rows = nullptr;    // device, num_rows
  const DecodeWorkItem* items = nullptr;  // device, num_items
  int num_rows = 0;
  int num_items = 0;
  float* scratch = nullptr;  // device, DecodeScratchFloats(num_items, ...)
  void* out = nullptr;  // row r at out + rows[r].qo_row * out_row_stride
  int64_t out_row_stride = 0;
};

// cudaErrorInvalidValue when head_dim or the group exceed the limits above,
// num_heads is not a multiple of num_kv_heads, or the element size is not 2 or 4.
// Items with a negative row are skipped (a graph's static grid).
cudaError_t LaunchDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_ATTENTION_KERNEL_H_

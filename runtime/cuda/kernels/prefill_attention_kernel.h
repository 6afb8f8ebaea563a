// Launcher of paged prefill / chunk attention: causal, one CTA per (tile of query rows,
// query head) from the host tile plan (prefill_tile_plan.h). K/V of the cached prefix and
// of this chunk (already written by the KV write) are read through the device block
// table in tiles, with fp32 online softmax. Draft verification (K+1 rows) is a chunk.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_ATTENTION_KERNEL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_ATTENTION_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

// The largest head_dim is kMaxPrefillHeadDim, the most rows per tile
// kMaxPrefillTileRows (attention_desc.h).

// q and out hold elements of the pool's type (kv.element_bytes: bf16 or f32).
struct PrefillAttentionArgs {
  PagedKvDesc kv;
  int layer = 0;
  const void* q = nullptr;  // packed row r: [num_heads][head_dim] at q + r * q_row_stride
  int64_t q_row_stride = 0;
  int num_heads = 1;
  float scale = 1.0f;
  const PrefillTileDesc* tiles = nullptr;  // device
  int num_tiles = 0;
  void* out = nullptr;  // packed row r at out + r * out_row_stride
  int64_t out_row_stride = 0;
};

// cudaErrorInvalidValue when head_dim exceeds the limit, num_heads is not a multiple
// of num_kv_heads, or the element size is not 2 or 4. The tiles (device memory, which
// the launcher cannot read) must come from PlanPrefillTiles (prefill_tile_plan.h), which
// refuses tiles of 0 or more than kMaxPrefillTileRows rows; the kernel traps on such a
// tile (a sticky device error) rather than read or write out of bounds.
cudaError_t LaunchPrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_ATTENTION_KERNEL_H_

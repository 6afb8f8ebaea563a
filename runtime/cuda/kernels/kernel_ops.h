// absl::Status wrappers of the kernel launchers for the CUDA engine: each checks its
// shapes first (InvalidArgument naming the value and the limit, before anything is
// enqueued), then launches and maps a launch error through CudaStatus
// (runtime/cuda/cuda_status.h). Device pointers and streams as in the launchers.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_OPS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/decode_attention_kernel.h"
#include "runtime/cuda/kernels/prefill_attention_kernel.h"

namespace lockstep::cuda::kernels {

// The attention geometry every attention kernel needs: head_dim in [1, limit],
// num_heads a positive multiple of num_kv_heads, the group within kMaxDecodeGroup
// when `decode`, bf16 or f32 elements, 16-byte aligned KV storage.
absl::Status CheckAttentionShape(const PagedKvDesc& kv, int num_heads, bool decode);

absl::Status DecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream);
absl::Status PrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream);
// The element type must be the pool's (kv.element_bytes).
absl::Status WriteKv(const PagedKvDesc& kv, int layer, const Bf16* k, const Bf16* v,
                     int64_t row_stride, const int32_t* seqs, const int32_t* positions, int tokens,
                     cudaStream_t stream);
absl::Status WriteKv(const PagedKvDesc& kv, int layer, const float* k, const float* v,
                     int64_t row_stride, const int32_t* seqs, const int32_t* positions, int tokens,
                     cudaStream_t stream);

// MoE routing; InvalidArgument beyond kMaxMoeExperts / kMaxMoeTopK or for k > experts.
absl::Status MoeRoute(const float* logits, int rows, int num_experts, int k, bool renormalize,
                      int32_t* experts, float* weights, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_OPS_H_

// Multi-head latent attention of one layer on the device (the DeepSeek-V3 family), part of
// the forward pass (forward_pass.h): the query (q_a -> RMSNorm -> q_b, or q_proj), the
// latent vector (kv_a -> RMSNorm of c, interleaved RoPE of k_pe with YaRN's magnitude),
// written into the latent cache in the CPU engine's layout (one KV head: the K plane
// holds the first cache_head_dim values, the V plane the rest), then attention in the
// absorbed form (mla_kernels.h) for every row, prefill and decode alike, with W_UK and
// W_UV as cuBLASLt batched GEMMs over the heads (mla_projections.h).
// The CPU engine's MlaAttention (runtime/engine/cpu/mla_attention.h) is the reference.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_MLA_FORWARD_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_MLA_FORWARD_H_

#include "absl/status/status.h"
#include "runtime/cuda/engine/forward_pass.h"

namespace lockstep::cuda {

// out[rows][heads * v_head_dim] = MLA of layer `layer` on the normed x[rows][hidden];
// `context.kv` carries this step's block tables.
template <typename T>
absl::Status EnqueueMla(const ForwardContext& context, int layer, const T* x, T* out);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_MLA_FORWARD_H_

// Launchers of multi-head latent attention (DeepSeek-V2/V3) over the latent KV cache, the
// device form of the CPU engine's MlaAttention in its absorbed form
// (runtime/engine/cpu/mla_attention.h), and of the family's interleaved RoPE:
//
//   q_lat = [q_nope W_UK_h | q_pe | 0]    q_nope W_UK_h: a cuBLASLt batched GEMM
//                                          (mla_projections.h); the rest LaunchMlaQueryPe
//   acc   = softmax(q_lat · latent_t * scale) · c_t  LaunchMlaAttention (t <= the row's position)
//   out_h = W_UV_h acc                     a cuBLASLt batched GEMM (mla_projections.h)
//
// The cache holds per token and layer one KV head whose K plane has the latent vector's
// first `half` values and whose V plane the rest (engine::ModelConfig::cache_head_dim):
// latent = [c (kv_lora_rank) | k_pe (qk_rope_head_dim) | zero padding]. kv_b is the
// kv_b_proj weight [heads * (nope + v_head_dim), kv_lora_rank]: per head the W_UK rows,
// then the W_UV rows. The latent-space query is f32, the attention's weighted sum f32
// rounded once to the engine's element type (bf16, or f32), as are weights, q and out. Every row
// attends to positions [0, positions[row]] of sequence seqs[row] (prefill and decode rows alike;
// its own latent vector is written first); a pad row (seqs[row] < 0) gets zeros. Each returns the
// launch's error (cudaErrorInvalidValue beyond the limits below).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

struct MlaShape {
  int32_t heads = 0;
  int32_t nope = 0;  // qk_nope_head_dim
  int32_t rope = 0;  // qk_rope_head_dim (even)
  int32_t lora = 0;  // kv_lora_rank
  int32_t vdim = 0;  // v_head_dim
  int32_t half = 0;  // the cache's head_dim: (lora + rope + 1) / 2

  // Host-only (nvcc refuses them in kernels, which spell them out).
  int32_t qk() const { return nope + rope; }
  int32_t latent() const { return 2 * half; }
};

// In place: in each of `heads` vectors of token t at x + t * row_stride + h * head_stride,
// the `dim` values rotate in interleaved pairs (2i, 2i + 1) by positions[t] * inv_freq[i]
// (double angles, as RopeAngles), cos and sin rounded to f32 and multiplied by
// `magnitude` (YaRN's; 1 without): runtime/engine/cpu/rope.h's ApplyRopeInterleaved.
cudaError_t LaunchRopeInterleaved(Bf16* x, int64_t row_stride, int tokens, int heads,
                                  int64_t head_stride, int dim, const int32_t* positions,
                                  const double* inv_freq, float magnitude, cudaStream_t stream);
cudaError_t LaunchRopeInterleaved(float* x, int64_t row_stride, int tokens, int heads,
                                  int64_t head_stride, int dim, const int32_t* positions,
                                  const double* inv_freq, float magnitude, cudaStream_t stream);

// q: [rows][heads * qk] (q_pe already rotated), rows q_stride apart; q_lat: f32
// [rows][heads][latent], of which this writes [lora, latent): q_pe, then zeros.
cudaError_t LaunchMlaQueryPe(const Bf16* q, int64_t q_stride, int rows, const MlaShape& shape,
                             float* q_lat, cudaStream_t stream);
cudaError_t LaunchMlaQueryPe(const float* q, int64_t q_stride, int rows, const MlaShape& shape,
                             float* q_lat, cudaStream_t stream);

// acc: [rows][heads][lora], f32 or bf16 (the f32 sums rounded). kv.num_kv_heads must be
// 1 and kv.head_dim shape.half.
cudaError_t LaunchMlaAttention(const PagedKvDesc& kv, int layer, const float* q_lat,
                               const MlaShape& shape, const int32_t* seqs,
                               const int32_t* positions, int rows, float scale, float* acc,
                               cudaStream_t stream);
cudaError_t LaunchMlaAttention(const PagedKvDesc& kv, int layer, const float* q_lat,
                               const MlaShape& shape, const int32_t* seqs, const int32_t* positions,
                               int rows, float scale, Bf16* acc, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_KERNELS_H_

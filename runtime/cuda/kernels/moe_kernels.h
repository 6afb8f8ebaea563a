// Launchers of the MoE kernels: top-k routing with softmax (the CPU engine's rule,
// runtime/engine/cpu/moe_route.h: ties to the lower expert id, experts in ascending id order,
// optional renormalisation), the counting-sort permutation of (row, choice) entries to
// experts (moe_permutation.h is its host reference), the gather of token rows into
// expert order (or into the expert-parallel send layout), and the weighted combine in
// ascending expert order. The per-expert GEMMs between gather and combine are
// moe_expert_gemm.h (cuBLASLt, host offsets) or grouped_gemm_kernel.h (device counts,
// static shapes: what the engine and its CUDA graphs use). bf16 or f32 rows.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

inline constexpr int kMaxMoeExperts = 512;
inline constexpr int kMaxMoeTopK = 16;

// For each of `rows` rows of f32 router logits [num_experts]: experts[row * k + j] and
// weights[row * k + j], j < k, in ascending expert id. cudaErrorInvalidValue beyond the
// limits above or for k > num_experts.
cudaError_t LaunchMoeRoute(const float* logits, int rows, int num_experts, int k, bool renormalize,
                           int32_t* experts, float* weights, cudaStream_t stream);

// Counting sort of the `entries` expert ids: offsets[num_experts + 1], entry_of_slot and
// slot_of_entry [entries], each expert's entries in entry order (stable).
cudaError_t LaunchMoePermute(const int32_t* experts, int entries, int num_experts, int32_t* offsets,
                             int32_t* entry_of_slot, int32_t* slot_of_entry, cudaStream_t stream);

// x_perm[slot] = x[entry_of_slot[slot] / k] (rows of `hidden`). With k = 1 it is a row
// gather: the engine's embedding lookup (entry_of_slot = tokens) and the pick of the
// logit rows.
cudaError_t LaunchMoeGather(const Bf16* x, int hidden, const int32_t* entry_of_slot, int entries,
                            int k, Bf16* x_perm, cudaStream_t stream);
cudaError_t LaunchMoeGather(const float* x, int hidden, const int32_t* entry_of_slot, int entries,
                            int k, float* x_perm, cudaStream_t stream);

// The same into the expert-parallel send layout: out[dest[slot]] = x[entry_of_slot[slot] / k].
cudaError_t LaunchMoeScatter(const Bf16* x, int hidden, const int32_t* entry_of_slot,
                             const int32_t* dest, int entries, int k, Bf16* out,
                             cudaStream_t stream);
cudaError_t LaunchMoeScatter(const float* x, int hidden, const int32_t* entry_of_slot,
                             const int32_t* dest, int entries, int k, float* out,
                             cudaStream_t stream);

// out[row] = sum over j < k, in order, of weights[row * k + j] * y_perm[slot_of_entry[row * k + j]]
// (f32 fused multiply-adds from 0, as the CPU combine does).
cudaError_t LaunchMoeCombine(const Bf16* y_perm, int hidden, const int32_t* slot_of_entry,
                             const float* weights, int rows, int k, Bf16* out, cudaStream_t stream);
// The same reading slot s's row at y[dest[s]] (the rows came back in the send layout).
cudaError_t LaunchMoeCombineFrom(const Bf16* y, int hidden, const int32_t* slot_of_entry,
                                 const int32_t* dest, const float* weights, int rows, int k,
                                 Bf16* out, cudaStream_t stream);
cudaError_t LaunchMoeCombineFrom(const float* y, int hidden, const int32_t* slot_of_entry,
                                 const int32_t* dest, const float* weights, int rows, int k,
                                 float* out, cudaStream_t stream);

// The expert-parallel layout of a permutation (LaunchMoePermute's offsets) over `world`
// ranks, each owning a contiguous range of experts (ExpertsOfRank,
// runtime/engine/model/weight_plan.h): slot s of an expert of rank p goes to
// dest[s] = p * capacity + (s - offsets[first expert of p]), so rank p's rows are
// `capacity` rows from p * capacity on (the static per-peer count of the exchange), and
// counts[p * max_local + j] = the rows of p's j-th expert (0 beyond its experts). With
// world 1 and capacity >= entries, dest is the identity and counts the expert counts.
// `capacity` must hold every rank's rows (the caller sizes it: rows * min(k, max_local)).
cudaError_t LaunchMoeDispatchLayout(const int32_t* offsets, int num_experts, int world,
                                    int capacity, int max_local, int entries, int32_t* dest,
                                    int32_t* counts, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_KERNELS_H_

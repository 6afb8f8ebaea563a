// Launchers of the grouped GEMM of the MoE experts with the row counts on the device, so
// the shapes the host enqueues are static (a CUDA graph can hold it, and no count has to
// come back to the host in the middle of a forward).
//
// Rows are given as `groups` groups of `group_rows` rows each (one per source rank of
// the expert-parallel exchange, or one group for a single rank); counts[g * max_local +
// j] rows of group g, starting at row g * group_rows + (the counts of its experts before
// j), belong to local expert j and are multiplied by weights[j] ([n, k] row-major). The
// plan kernel turns the counts into tiles of at most kGroupedGemmTileRows rows of one
// expert; the GEMM kernel computes each tile, its output rows at the same row indices.
// Rows outside every tile are neither read nor written.
//
// Each output element is one chain of f32 fused multiply-adds over k in order from +0
// (the CPU engine's Gemm order, runtime/engine/cpu/gemm.h), whatever the tile, the batch or
// the other rows: batch-invariant by construction, and in f32 equal to the CPU's.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_GEMM_KERNEL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_GEMM_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/moe_desc.h"

namespace lockstep::cuda::kernels {

// Fills tiles[0, max_tiles) from the counts (unused tiles get expert -1).
// cudaErrorInvalidValue for a non-positive size.
cudaError_t LaunchGroupedGemmPlan(const int32_t* counts, int groups, int max_local,
                                  int local_experts, int group_rows, GroupedGemmTile* tiles,
                                  int max_tiles, cudaStream_t stream);

// y[r] = x[r] · weights[expert]ᵀ for the rows of every tile (x rows of k, y rows of n).
// `weights` is a device array of local_experts device pointers.
cudaError_t LaunchGroupedGemm(const Bf16* x, const GroupedGemmTile* tiles, int max_tiles,
                              const Bf16* const* weights, int n, int k, Bf16* y,
                              cudaStream_t stream);
cudaError_t LaunchGroupedGemm(const float* x, const GroupedGemmTile* tiles, int max_tiles,
                              const float* const* weights, int n, int k, float* y,
                              cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_GEMM_KERNEL_H_

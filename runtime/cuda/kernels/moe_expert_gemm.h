// The per-expert GEMMs of an MoE layer over the permuted rows (moe_kernels.h): expert e
// multiplies rows [offsets[e], offsets[e + 1]) by its weight [n, k]. The offsets are on the
// host (copied back after LaunchMoePermute); experts without rows are skipped. In
// batch-invariant mode each expert's GEMM uses the fixed algorithm of its (n, k).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_EXPERT_GEMM_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_EXPERT_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"

namespace lockstep::cuda::kernels {

// y_perm [offsets.back()][n] = per-expert x_perm [.][k] · expert_weights[e]ᵀ.
// InvalidArgument when the sizes disagree.
absl::Status GroupedExpertGemm(CublasLtGemm& gemm, const Bf16* x_perm,
                               absl::Span<const int32_t> offsets,
                               absl::Span<const Bf16* const> expert_weights, int64_t n, int64_t k,
                               Bf16* y_perm);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_EXPERT_GEMM_H_

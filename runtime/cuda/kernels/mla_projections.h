// MLA's absorbed per-head projections on cuBLASLt (mla_kernels.h has the attention
// between them): one strided-batched GEMM over the heads for each.
//
//   MlaAbsorbQuery: q_lat[row][h] = [q_nope_h W_UK_h | q_pe_h | 0]; W_UK_h is kv_b's
//     [nope, lora] rows of head h (not transposed); f32 out from bf16 (or f32) in, so the
//     latent query is not rounded.
//   MlaApplyUv: out[row][h * vdim ..] = acc_h W_UV_hᵀ; W_UV_h is kv_b's [vdim, lora] rows
//     of head h; acc is the attention's weighted sum in the engine's type (bf16: rounded
//     once from its f32 sums, as cuBLASLt takes one input type), out the same type.
//
// Both enqueue on `gemm`'s stream (the stream the launches use) and return its error,
// or InvalidArgument for a shape outside mla_kernels.h's limits. Thread-compatible.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_PROJECTIONS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_PROJECTIONS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/cuda/kernels/mla_kernels.h"

namespace lockstep::cuda::kernels {

// q: [rows][heads * qk] (q_pe rotated), rows q_stride apart; q_lat: f32
// [rows][heads][latent].
template <typename T>
absl::Status MlaAbsorbQuery(CublasLtGemm& gemm, const T* q, int64_t q_stride, int rows,
                            const MlaShape& shape, const T* kv_b, float* q_lat,
                            cudaStream_t stream);

// acc: [rows][heads][lora]; out: [rows][heads * vdim], rows out_stride apart.
template <typename T>
absl::Status MlaApplyUv(CublasLtGemm& gemm, const T* acc, int rows, const MlaShape& shape,
                        const T* kv_b, T* out, int64_t out_stride);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MLA_PROJECTIONS_H_

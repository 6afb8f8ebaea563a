#include "runtime/cuda/kernels/mla_projections.h"

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda::kernels {
namespace {

absl::Status CheckShape(const MlaShape& s, const char* what) {
  if (s.heads > 0 && s.nope > 0 && s.rope > 0 && s.rope % 2 == 0 && s.lora > 0 && s.vdim > 0 &&
      2 * s.half >= s.lora + s.rope && s.latent() <= kMaxMlaLatent) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": MLA shape heads ", s.heads, " nope ", s.nope, " rope ", s.rope, " lora ", s.lora,
      " vdim ", s.vdim, " half ", s.half, " (latent at most ", kMaxMlaLatent, ", rope even)"));
}

// Per head: kv_b's W_UK rows, then its W_UV rows, each lora long.
int64_t HeadStride(const MlaShape& s) { return static_cast<int64_t>(s.nope + s.vdim) * s.lora; }

}  // namespace

template <typename T>
absl::Status MlaAbsorbQuery(CublasLtGemm& gemm, const T* q, int64_t q_stride, int rows,
                            const MlaShape& shape, const T* kv_b, float* q_lat,
                            cudaStream_t stream) {
  if (absl::Status s = CheckShape(shape, "the absorbed query"); !s.ok()) return s;
  if (rows <= 0) return absl::OkStatus();
  // y_h [rows, lora] = q_nope_h [rows, nope] · W_UK_h [nope, lora].
  const GemmBatch heads{.count = shape.heads,
                        .x_ld = q_stride,
                        .x_stride = shape.qk(),
                        .w_ld = shape.lora,
                        .w_stride = HeadStride(shape),
                        .y_ld = static_cast<int64_t>(shape.heads) * shape.latent(),
                        .y_stride = shape.latent(),
                        .w_transposed = false};
  if (absl::Status s = gemm.BatchedGemm(q, rows, kv_b, shape.lora, shape.nope, q_lat, heads);
      !s.ok()) {
    return s;
  }
  return CudaStatus(LaunchMlaQueryPe(q, q_stride, rows, shape, q_lat, stream),
                    "the absorbed query's q_pe");
}

template <typename T>
absl::Status MlaApplyUv(CublasLtGemm& gemm, const T* acc, int rows, const MlaShape& shape,
                        const T* kv_b, T* out, int64_t out_stride) {
  if (absl::Status s = CheckShape(shape, "W_UV"); !s.ok()) return s;
  if (rows <= 0) return absl::OkStatus();
  // y_h [rows, vdim] = acc_h [rows, lora] · W_UV_h [vdim, lora]ᵀ.
  const GemmBatch heads{.count = shape.heads,
                        .x_ld = static_cast<int64_t>(shape.heads) * shape.lora,
                        .x_stride = shape.lora,
                        .w_ld = shape.lora,
                        .w_stride = HeadStride(shape),
                        .y_ld = out_stride,
                        .y_stride = shape.vdim};
  return gemm.BatchedGemm(acc, rows, kv_b + static_cast<int64_t>(shape.nope) * shape.lora,
                          shape.vdim, shape.lora, out, heads);
}

template absl::Status MlaAbsorbQuery<Bf16>(CublasLtGemm&, const Bf16*, int64_t, int,
                                           const MlaShape&, const Bf16*, float*, cudaStream_t);
template absl::Status MlaAbsorbQuery<float>(CublasLtGemm&, const float*, int64_t, int,
                                            const MlaShape&, const float*, float*, cudaStream_t);
template absl::Status MlaApplyUv<Bf16>(CublasLtGemm&, const Bf16*, int, const MlaShape&,
                                       const Bf16*, Bf16*, int64_t);
template absl::Status MlaApplyUv<float>(CublasLtGemm&, const float*, int, const MlaShape&,
                                        const float*, float*, int64_t);

}  // namespace lockstep::cuda::kernels

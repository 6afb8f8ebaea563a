#include "runtime/cuda/kernels/moe_expert_gemm.h"

#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

absl::Status GroupedExpertGemm(CublasLtGemm& gemm, const Bf16* x_perm,
                               absl::Span<const int32_t> offsets,
                               absl::Span<const Bf16* const> expert_weights, int64_t n, int64_t k,
                               Bf16* y_perm) {
  if (offsets.size() != expert_weights.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(offsets.size(), " offsets for ", expert_weights.size(), " experts"));
  }
  for (size_t e = 0; e < expert_weights.size(); ++e) {
    const int64_t rows = offsets[e + 1] - offsets[e];
    if (rows < 0)
      return absl::InvalidArgumentError(absl::StrCat("expert ", e, ": ", rows, " rows"));
    if (rows == 0) continue;
    if (absl::Status s = gemm.Gemm(x_perm + offsets[e] * k, rows, expert_weights[e], n, k,
                                   y_perm + offsets[e] * n);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::cuda::kernels

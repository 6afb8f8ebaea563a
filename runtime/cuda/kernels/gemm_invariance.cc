#include "runtime/cuda/kernels/gemm_invariance.h"

#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

absl::StatusOr<int> FirstInvariantCandidate(
    int first, int count, const std::function<bool(int)>& usable,
    const std::function<absl::StatusOr<bool>(int)>& invariant, std::vector<std::string>* refused) {
  for (int i = first; i < count; ++i) {
    if (!usable(i)) {
      refused->push_back(absl::StrCat("candidate ", i, ": split-K"));
      continue;
    }
    absl::StatusOr<bool> same = invariant(i);
    if (!same.ok()) return same.status();
    if (*same) return i;
    refused->push_back(
        absl::StrCat("candidate ", i, ": row 0 differs between M = 1 and the batch"));
  }
  return absl::NotFoundError(
      absl::StrCat("none of candidates ", first, "..", count - 1, " is batch-invariant"));
}

}  // namespace lockstep::cuda::kernels

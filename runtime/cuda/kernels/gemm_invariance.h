// Which cuBLASLt candidate the batch-invariant GEMM uses: the first of the heuristic's
// candidates (from the wanted index on) that is usable (split-K 1) and, checked at first
// use on probe data, gives row 0 the same bits at M = 1 as in a batch of the largest M.
// One fixed algorithm being M-independent is an assumption (split-K and stream-K
// reductions can break it), so it is verified rather than trusted. The verification
// itself runs cuBLASLt (cublaslt_gemm.cc); this is the choice, plain C++.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_INVARIANCE_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_INVARIANCE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::cuda::kernels {

// The first candidate in [first, count) that `usable` accepts and `invariant` finds
// invariant. Each candidate passed over adds a line to `refused` ("candidate i: ...").
// An error of `invariant` is returned as is; NotFound when no candidate qualifies.
absl::StatusOr<int> FirstInvariantCandidate(
    int first, int count, const std::function<bool(int)>& usable,
    const std::function<absl::StatusOr<bool>(int)>& invariant, std::vector<std::string>* refused);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_INVARIANCE_H_

// MoE counting-sort permutation: the (token row, choice) entries of a routed batch
// grouped by expert, experts in ascending id order and each expert's entries in token
// order (stable), so expert e's GEMM reads rows [offsets[e], offsets[e + 1]) of the
// permuted activations. The combine sums a row's experts in ascending id order (the
// CPU engine's order, runtime/engine/cpu/moe.h) through slot_of_entry.
//
// Pure host code: the reference for the device permutation kernel and the planner of
// host-driven grouped GEMMs.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_PERMUTATION_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_PERMUTATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace lockstep::cuda::kernels {

struct MoePermutation {
  std::vector<int32_t> expert_offsets;  // num_experts + 1 prefix sums of the counts
  std::vector<int32_t> entry_of_slot;   // permuted slot -> entry (row * k + choice)
  std::vector<int32_t> slot_of_entry;   // the inverse
};

// `experts` is [rows][k] (row-major) of expert ids. InvalidArgument when k < 1, the size
// is not a multiple of k, or an id is outside [0, num_experts).
absl::StatusOr<MoePermutation> PermuteToExperts(absl::Span<const int32_t> experts, int k,
                                                int num_experts);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_PERMUTATION_H_

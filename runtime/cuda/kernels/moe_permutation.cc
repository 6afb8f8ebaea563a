#include "runtime/cuda/kernels/moe_permutation.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

absl::StatusOr<MoePermutation> PermuteToExperts(absl::Span<const int32_t> experts, int k,
                                                int num_experts) {
  if (k < 1 || num_experts < 1 || experts.size() % k != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(experts.size(), " entries, k = ", k, ", ", num_experts, " experts"));
  }
  MoePermutation perm;
  perm.expert_offsets.assign(num_experts + 1, 0);
  for (size_t i = 0; i < experts.size(); ++i) {
    if (experts[i] < 0 || experts[i] >= num_experts) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", i, ": expert ", experts[i], " of ", num_experts));
    }
    ++perm.expert_offsets[experts[i] + 1];
  }
  for (int e = 0; e < num_experts; ++e) perm.expert_offsets[e + 1] += perm.expert_offsets[e];
  std::vector<int32_t> cursor(perm.expert_offsets.begin(), perm.expert_offsets.end() - 1);
  perm.entry_of_slot.resize(experts.size());
  perm.slot_of_entry.resize(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) {  // entry order = token order: stable
    const int32_t slot = cursor[experts[i]]++;
    perm.entry_of_slot[slot] = static_cast<int32_t>(i);
    perm.slot_of_entry[i] = slot;
  }
  return perm;
}

}  // namespace lockstep::cuda::kernels

#include "runtime/cuda/kernels/decode_split_plan.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

RowSplitShape SplitShapeForLength(int64_t context_len, const DecodeSplitOptions& options) {
  const int64_t base = options.split_tokens;
  int64_t num = (context_len + base - 1) / base;
  int64_t tokens = base;
  if (num > options.max_splits) {
    // Grow the split by whole multiples of the base length until the cap holds.
    const int64_t factor = (num + options.max_splits - 1) / options.max_splits;
    tokens = base * factor;
    num = (context_len + tokens - 1) / tokens;
  }
  return {static_cast<int32_t>(num), static_cast<int32_t>(tokens)};
}

absl::StatusOr<DecodeSplitPlan> PlanDecodeSplits(absl::Span<const int64_t> context_lens,
                                                 absl::Span<const int32_t> seqs,
                                                 const DecodeSplitOptions& options) {
  if (options.split_tokens < 1 || options.max_splits < 1) {
    return absl::InvalidArgumentError(absl::StrCat("split_tokens (", options.split_tokens,
                                                   ") and max_splits (", options.max_splits,
                                                   ") must be >= 1"));
  }
  if (context_lens.size() != seqs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(context_lens.size(), " context lengths but ",
                                                   seqs.size(), " sequence indices"));
  }
  DecodeSplitPlan plan;
  plan.rows.reserve(context_lens.size());
  int64_t total = 0;
  for (size_t r = 0; r < context_lens.size(); ++r) {
    const int64_t len = context_lens[r];
    if (len < 1 || len > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("query row ", r, ": context length ", len, " is not in [1, 2^31)"));
    }
    if (seqs[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("query row ", r, ": sequence ", seqs[r]));
    }
    const RowSplitShape shape = SplitShapeForLength(len, options);
    if (total + shape.num_splits > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("more than 2^31 splits in one batch");
    }
    plan.rows.push_back({.seq = seqs[r],
                         .context_len = static_cast<int32_t>(len),
                         .split_begin = static_cast<int32_t>(total),
                         .num_splits = shape.num_splits,
                         .split_tokens = shape.split_tokens,
                         .qo_row = static_cast<int32_t>(r)});
    for (int32_t s = 0; s < shape.num_splits; ++s) {
      plan.items.push_back({.row = static_cast<int32_t>(r), .split = s});
    }
    total += shape.num_splits;
  }
  return plan;
}

}  // namespace lockstep::cuda::kernels

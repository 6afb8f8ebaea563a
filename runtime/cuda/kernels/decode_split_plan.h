// Flash-decoding split plan: how the paged decode attention kernel cuts each query
// row's context into splits (one CTA column each) and where the merge kernel finds
// their partial results.
//
// A query row attends to positions [0, context_len). Its split count and split length
// depend only on its own context_len and the options, never on the other rows of the
// batch, so a row's result is the same whatever batch it is in (batch-invariant). A
// decode step has one query row per sequence; draft verification has K+1 rows per
// sequence, row j with context_len = base + j + 1.
//
//   absl::StatusOr<DecodeSplitPlan> plan = PlanDecodeSplits(context_lens, options);
//   // copy plan->rows and plan->items to the device; grid.x = plan->items.size()
//
// Pure host code.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_SPLIT_PLAN_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_SPLIT_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/cuda/kernels/attention_desc.h"

namespace lockstep::cuda::kernels {

struct DecodeSplitOptions {
  // Tokens per split before the cap; best a multiple of tokens_per_block.
  int split_tokens = 256;
  // At most this many splits per row: longer contexts get longer splits (a multiple
  // of split_tokens).
  int max_splits = 32;
};

// The splits of one row with `context_len` (>= 1) positions.
struct RowSplitShape {
  int32_t num_splits = 0;
  int32_t split_tokens = 0;
};
RowSplitShape SplitShapeForLength(int64_t context_len, const DecodeSplitOptions& options);

struct DecodeSplitPlan {
  std::vector<DecodeRowDesc> rows;    // per query row, in the caller's order
  std::vector<DecodeWorkItem> items;  // row-major: the splits of row 0, then row 1, ...
  int32_t total_splits() const { return static_cast<int32_t>(items.size()); }
};

// `context_lens[r]` of query row r, `seqs[r]` its block-table row (the sequence); row r's
// q and out are row r (qo_row; a caller may renumber them).
// InvalidArgument when a length is < 1 or > INT32_MAX, the options are not positive, or
// the sizes differ.
absl::StatusOr<DecodeSplitPlan> PlanDecodeSplits(absl::Span<const int64_t> context_lens,
                                                 absl::Span<const int32_t> seqs,
                                                 const DecodeSplitOptions& options);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_DECODE_SPLIT_PLAN_H_

// The CUDA graph buckets of the decode steps (plain C++; the CUDA engine captures one
// graph per bucket after warm-up). A step of `rows` target rows (generation tokens
// plus the drafts they verify) replays the smallest bucket that holds them, its extra
// rows padded; a step with more rows than the largest bucket runs eagerly. Under
// attention data parallelism every rank replays the same bucket, chosen from the
// largest row count of the step's vote (BucketForRanks); a rank with nothing to run
// replays the pad dummy in the smallest bucket.
//
//   ASSIGN_OR_RETURN(GraphBuckets buckets, GraphBuckets::Plan(max_batch_size, k, sizes));
//   if (std::optional<int64_t> bucket = buckets.BucketFor(rows)) { ... replay } else { eager }
//
// Immutable after Plan; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_GRAPH_BUCKETS_H_
#define LOCKSTEP_RUNTIME_ENGINE_GRAPH_BUCKETS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace lockstep::engine {

class GraphBuckets {
 public:
  // The buckets for steps of at most max_rows = max_batch_size * (1 + K) rows, sorted
  // ascending without repeats. `configured` (cuda.graph_batch_sizes, any order; empty:
  // the defaults) must lie in [1, max_rows]; repeats are dropped. The defaults are
  // 1, 2, 4, 8, then every 8 up to 256, then every 64, capped at max_rows, and
  // max_rows itself. InvalidArgument for max_batch_size < 1, K < 0, or a configured
  // size outside [1, max_rows] (the message names it).
  static absl::StatusOr<GraphBuckets> Plan(int64_t max_batch_size, int num_draft_tokens,
                                           absl::Span<const int64_t> configured);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  int64_t max_rows() const { return max_rows_; }

  // The smallest bucket >= rows; nullopt (run eagerly) when rows exceeds the largest.
  // rows <= 0 (nothing to run: the pad dummy) is the smallest bucket.
  std::optional<int64_t> BucketFor(int64_t rows) const;

  // The bucket every rank replays: BucketFor of the largest row count of the ranks.
  std::optional<int64_t> BucketForRanks(absl::Span<const int64_t> rows_per_rank) const;

  // The bucket the pad dummy replays: the smallest.
  int64_t dummy_bucket() const { return sizes_.front(); }

 private:
  GraphBuckets(std::vector<int64_t> sizes, int64_t max_rows)
      : sizes_(std::move(sizes)), max_rows_(max_rows) {}

  std::vector<int64_t> sizes_;  // never empty
  int64_t max_rows_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_GRAPH_BUCKETS_H_

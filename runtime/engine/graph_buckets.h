// The CUDA graph buckets of the decode steps (plain C++; the CUDA engine captures the
// graphs after warm-up). A step of `rows` target rows (generation tokens plus the
// drafts they verify) replays the graph of the smallest bucket that holds them, its
// extra rows padded; a step with more rows than the largest bucket runs eagerly.
//
// Expert parallelism: a graph holds its MoE exchanges, whose per-peer capacity every
// rank must size alike. Each rank sizes them from the largest row count of the step's
// vote (B = BucketFor(agreed rows)) and replays a graph keyed by (its own rows' bucket,
// B): the bucket B itself, or, when its own rows fit the pad dummy's bucket (the
// smallest holding the dummy's 1 + K rows: a rank with only the dummy), that smaller
// bucket with exchanges of B's capacity. So every rank's exchanges match while a rank
// with nothing to run computes the dummy's bucket, not B. Without exchanges (one rank,
// or a dense model) a rank replays its own rows' bucket.
//
//   ASSERT_OK_AND_ASSIGN(GraphBuckets buckets, GraphBuckets::Plan(max_batch_size, k, sizes));
//   for (GraphKey key : buckets.Graphs(exchanges)) { ... capture }
//   if (std::optional<GraphKey> key = buckets.GraphFor(rows, agreed, exchanges)) { ... replay }
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

// One captured graph: `rows` packed rows (a bucket) whose MoE exchanges carry the
// capacity of `exchange_rows` rows (a bucket >= rows); 0 without exchanges.
struct GraphKey {
  int64_t rows = 0;
  int64_t exchange_rows = 0;

  friend bool operator==(const GraphKey&, const GraphKey&) = default;
};

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
  // rows <= 0 is the smallest bucket.
  std::optional<int64_t> BucketFor(int64_t rows) const;

  // The pad dummy's bucket: the smallest holding its 1 + K rows (the rows the vote
  // counts for it), or the largest bucket when none does.
  int64_t dummy_bucket() const { return dummy_bucket_; }

  // The graphs to capture, in capture order (every rank of an expert-parallel group
  // captures the same list): with exchanges, (b, b) for every bucket b, then
  // (dummy_bucket, b) for every bucket b > dummy_bucket; without, (b, 0).
  std::vector<GraphKey> Graphs(bool exchanges) const;

  // The graph a decode step of `local_rows` rows replays when the vote's largest row
  // count is `agreed_rows` (see the file comment); nullopt: run eagerly (the rows
  // exceed the largest bucket). Always one of Graphs(exchanges).
  std::optional<GraphKey> GraphFor(int64_t local_rows, int64_t agreed_rows, bool exchanges) const;

 private:
  GraphBuckets(std::vector<int64_t> sizes, int64_t max_rows, int64_t dummy_rows);

  std::vector<int64_t> sizes_;  // never empty
  int64_t max_rows_ = 0;
  int64_t dummy_bucket_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_GRAPH_BUCKETS_H_

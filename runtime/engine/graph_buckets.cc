#include "runtime/engine/graph_buckets.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {

absl::StatusOr<GraphBuckets> GraphBuckets::Plan(int64_t max_batch_size, int num_draft_tokens,
                                                absl::Span<const int64_t> configured) {
  if (max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size must be >= 1, got ", max_batch_size));
  }
  if (num_draft_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_draft_tokens must be >= 0, got ", num_draft_tokens));
  }
  const int64_t max_rows = max_batch_size * (1 + static_cast<int64_t>(num_draft_tokens));
  std::vector<int64_t> sizes;
  if (configured.empty()) {
    for (int64_t rows = 1; rows < 8; rows *= 2) sizes.push_back(rows);
    for (int64_t rows = 8; rows <= 256; rows += 8) sizes.push_back(rows);
    for (int64_t rows = 320; rows < max_rows; rows += 64) sizes.push_back(rows);
    sizes.erase(
        std::remove_if(sizes.begin(), sizes.end(), [&](int64_t rows) { return rows > max_rows; }),
        sizes.end());
    sizes.push_back(max_rows);
  } else {
    for (size_t i = 0; i < configured.size(); ++i) {
      if (configured[i] < 1 || configured[i] > max_rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph_batch_sizes[", i, "] must be in [1, ", max_rows,
                         "] (max_batch_size * (1 + K)), got ", configured[i]));
      }
      sizes.push_back(configured[i]);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return GraphBuckets(std::move(sizes), max_rows);
}

std::optional<int64_t> GraphBuckets::BucketFor(int64_t rows) const {
  const auto it = std::lower_bound(sizes_.begin(), sizes_.end(), rows);
  if (it == sizes_.end()) return std::nullopt;
  return *it;
}

std::optional<int64_t> GraphBuckets::BucketForRanks(absl::Span<const int64_t> rows_per_rank) const {
  int64_t rows = 0;
  for (int64_t r : rows_per_rank) rows = std::max(rows, r);
  return BucketFor(rows);
}

}  // namespace lockstep::engine

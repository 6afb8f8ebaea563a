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
  return GraphBuckets(std::move(sizes), max_rows, 1 + static_cast<int64_t>(num_draft_tokens));
}

GraphBuckets::GraphBuckets(std::vector<int64_t> sizes, int64_t max_rows, int64_t dummy_rows)
    : sizes_(std::move(sizes)), max_rows_(max_rows) {
  dummy_bucket_ = BucketFor(dummy_rows).value_or(sizes_.back());
}

std::optional<int64_t> GraphBuckets::BucketFor(int64_t rows) const {
  const auto it = std::lower_bound(sizes_.begin(), sizes_.end(), rows);
  if (it == sizes_.end()) return std::nullopt;
  return *it;
}

std::vector<GraphKey> GraphBuckets::Graphs(bool exchanges) const {
  std::vector<GraphKey> keys;
  for (int64_t b : sizes_) keys.push_back({b, exchanges ? b : 0});
  if (exchanges) {
    for (int64_t b : sizes_) {
      if (b > dummy_bucket_) keys.push_back({dummy_bucket_, b});
    }
  }
  return keys;
}

std::optional<GraphKey> GraphBuckets::GraphFor(int64_t local_rows, int64_t agreed_rows,
                                               bool exchanges) const {
  if (!exchanges) {
    const std::optional<int64_t> bucket = BucketFor(local_rows);
    if (!bucket.has_value()) return std::nullopt;
    return GraphKey{*bucket, 0};
  }
  const std::optional<int64_t> agreed = BucketFor(std::max(local_rows, agreed_rows));
  if (!agreed.has_value()) return std::nullopt;
  if (local_rows <= dummy_bucket_ && dummy_bucket_ < *agreed) {
    return GraphKey{dummy_bucket_, *agreed};
  }
  return GraphKey{*agreed, *agreed};
}

}  // namespace lockstep::engine

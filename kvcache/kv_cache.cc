#include "kvcache/kv_cache.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace lockstep::kv {

void KvCache::Reset(RequestId id, uint64_t generation) {
  id_ = id;
  generation_ = generation;
  committed_ = history_ = capacity_ = 0;
  status_ = CacheStatus::kActive;
  blocks_.clear();
  tree_blocks_ = 0;
  publishing_stopped_ = false;
}

absl::StatusOr<KvCache::Lengths> KvCache::ResolveResize(std::optional<int64_t> capacity,
                                                        std::optional<int64_t> history) const {
  if (status_ != CacheStatus::kActive) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cache of request ", id_.value(), " (generation ", generation_, ") is ",
        status_ == CacheStatus::kSuspended ? "suspended" : "closed", " and cannot be resized"));
  }
  const Lengths next{.capacity = capacity.value_or(capacity_),
                     .history = history.value_or(history_)};
  if (next.history < history_) {
    return absl::InvalidArgumentError("history length cannot decrease");
  }
  if (next.history > next.capacity) {
    return absl::InvalidArgumentError("history length cannot exceed capacity");
  }
  return next;
}

CacheInfo KvCache::Info() const {
  return CacheInfo{.generation = generation_,
                   .committed = committed_,
                   .history = history_,
                   .capacity = capacity_,
                   .status = status_};
}

void KvCache::SetLengths(const Lengths& lengths) {
  LOCKSTEP_DCHECK(committed_ <= lengths.history && lengths.history <= lengths.capacity);
  capacity_ = lengths.capacity;
  history_ = lengths.history;
}

void KvCache::RaiseCommitted(int64_t committed) {
  LOCKSTEP_DCHECK(committed <= history_);
  committed_ = std::max(committed_, committed);
}

BlockId KvCache::PopBlock() {
  LOCKSTEP_DCHECK(static_cast<int32_t>(blocks_.size()) > tree_blocks_);
  const BlockId block = blocks_.back();
  blocks_.pop_back();
  return block;
}

}  // namespace lockstep::kv

#include "runtime/testing/block_write_tracker.h"

#include <algorithm>

namespace lockstep::engine {
namespace {

int64_t Key(int pool, int32_t block) { return (static_cast<int64_t>(pool) << 32) | block; }

}  // namespace

void BlockWriteTracker::Launched(int64_t step, const std::vector<Block>& blocks) {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t>& keys = batches_[step];
  for (const Block& b : blocks) {
    const int64_t key = Key(b.pool, b.block);
    keys.push_back(key);
    holders_[key].push_back(step);
  }
}

void BlockWriteTracker::Collected(int64_t step) {
  absl::MutexLock lock(&mu_);
  auto it = batches_.find(step);
  if (it == batches_.end()) return;
  for (int64_t key : it->second) {
    std::vector<int64_t>& steps = holders_[key];
    steps.erase(std::find(steps.begin(), steps.end(), step));
    if (steps.empty()) holders_.erase(key);
  }
  batches_.erase(it);
}

std::optional<int64_t> BlockWriteTracker::Holder(int pool, int32_t block) const {
  absl::MutexLock lock(&mu_);
  auto it = holders_.find(Key(pool, block));
  if (it == holders_.end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

}  // namespace lockstep::engine

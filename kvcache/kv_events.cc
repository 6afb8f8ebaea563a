#include "kvcache/kv_events.h"

#include <utility>

namespace lockstep::kv {

void KvEventLog::Record(uint64_t key, Tier tier, bool held) {
  // A tier holds a key at most once, so the first touch tells whether it was held
  // before: a first store means it was not, a first removal that it was.
  const auto [it, first] = touched_.try_emplace(TierKey(key, tier));
  if (first) {
    it->second.held_before = !held;
    order_.push_back(it->first);
  }
  it->second.held_now = held;
}

KvEventDelta KvEventLog::Take() {
  KvEventDelta delta;
  for (const TierKey& tier_key : order_) {
    const Touch& t = touched_.at(tier_key);
    const auto [key, tier] = tier_key;
    std::vector<uint64_t>* stored = &delta.committed;
    std::vector<uint64_t>* removed = &delta.evicted;
    if (tier == Tier::kHost) {
      stored = &delta.host.stored;
      removed = &delta.host.removed;
    } else if (tier == Tier::kDisk) {
      stored = &delta.disk.stored;
      removed = &delta.disk.removed;
    }
    if (t.held_now) {
      stored->push_back(key);
    } else if (t.held_before) {
      removed->push_back(key);
    }
  }
  touched_.clear();
  order_.clear();
  return delta;
}

}  // namespace lockstep::kv

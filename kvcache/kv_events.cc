#include "kvcache/kv_events.h"

#include <utility>

namespace lockstep::kv {

void KvEventLog::Record(uint64_t key, bool committed) {
  // The tree holds a key at most once, so the first touch tells whether it was held
  // before: a first commit means it was not, a first eviction that it was.
  const auto [it, first] = touched_.try_emplace(key);
  if (first) {
    it->second.held_before = !committed;
    order_.push_back(key);
  }
  it->second.held_now = committed;
}

KvEventDelta KvEventLog::Take() {
  KvEventDelta delta;
  for (uint64_t key : order_) {
    const Touch& t = touched_.at(key);
    if (t.held_now) {
      delta.committed.push_back(key);
    } else if (t.held_before) {
      delta.evicted.push_back(key);
    }
  }
  touched_.clear();
  order_.clear();
  return delta;
}

}  // namespace lockstep::kv

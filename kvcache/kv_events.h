// KV events: the block-hash keys (kvcache/prefix_hash.h) a rank's target radix tree
// gains and loses, and those its host and disk tiers (kv_tiers.h) store and drop, for
// the router's prefix index (kv_aware routing), which weighs a hit by its tier.
//
// The tree reports each key it publishes and each it evicts to a KvEventObserver (at
// most one, set on the KvManager); the tiers report each key they store and remove to
// the same observer. Each tier holds a key at most once; a key may be in the device
// tier and one lower tier at the same time (a block copied down is still published).
// KvEventLog is the observer a rank uses: per tier, it coalesces what happened since
// its last Take into one KvEventDelta whose order of application — removed keys first,
// then stored ones — gives the tier's current key set:
//   * a key committed and evicted again since the last Take is in neither list;
//   * a key evicted and committed again is only in `committed`.
// The executor takes one delta per step and gathers them to the leader, which hands
// them to a KvEventSink (the worker's publisher: numbering, snapshots, the wire).
//
// Thread safety: KvEventLog is not thread-safe; it lives on the executor thread like
// the KvManager that feeds it.
#ifndef LOCKSTEP_KVCACHE_KV_EVENTS_H_
#define LOCKSTEP_KVCACHE_KV_EVENTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "kvcache/tier_config.h"

namespace lockstep::kv {

class KvEventObserver {
 public:
  virtual ~KvEventObserver() = default;
  // `key` entered the tree (a block was published under it).
  virtual void OnCommitted(uint64_t key) = 0;
  // `key` left the tree (its block was evicted).
  virtual void OnEvicted(uint64_t key) = 0;
  // A tier below the device (kHost or kDisk) stored `key` / removed it.
  virtual void OnStoredBelow(uint64_t key, Tier tier) {}
  virtual void OnRemovedBelow(uint64_t key, Tier tier) {}
};

// Keys one lower tier stored and removed over some interval (removed applied first).
struct TierKeyDelta {
  std::vector<uint64_t> stored;
  std::vector<uint64_t> removed;
  bool empty() const { return stored.empty() && removed.empty(); }
};

// What changed in one rank's tiers over some interval, coalesced (see above).
struct KvEventDelta {
  std::vector<uint64_t> committed;  // the device tier (the target radix tree)
  std::vector<uint64_t> evicted;
  TierKeyDelta host;
  TierKeyDelta disk;
  bool empty() const {
    return committed.empty() && evicted.empty() && host.empty() && disk.empty();
  }
};

class KvEventLog final : public KvEventObserver {
 public:
  void OnCommitted(uint64_t key) override { Record(key, Tier::kDevice, /*held=*/true); }
  void OnEvicted(uint64_t key) override { Record(key, Tier::kDevice, /*held=*/false); }
  void OnStoredBelow(uint64_t key, Tier tier) override { Record(key, tier, /*held=*/true); }
  void OnRemovedBelow(uint64_t key, Tier tier) override { Record(key, tier, /*held=*/false); }

  // The delta since the previous Take (keys in the order first touched); starts over.
  KvEventDelta Take();
  bool empty() const { return order_.empty(); }

 private:
  struct Touch {
    bool held_before = false;  // in the tree at the previous Take
    bool held_now = false;
  };
  using TierKey = std::pair<uint64_t, Tier>;
  void Record(uint64_t key, Tier tier, bool held);

  absl::flat_hash_map<TierKey, Touch> touched_;
  std::vector<TierKey> order_;  // keys of touched_, first touch first
};

// Receives, on the leader, every rank's delta of one step (index = rank; empty deltas
// included), on the executor thread. Must not block.
class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void OnKvEvents(absl::Span<const KvEventDelta> per_rank) = 0;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_EVENTS_H_

// KV events: the block-hash keys (kvcache/prefix_hash.h) a rank's target radix tree
// gains and loses, for the router's prefix index (kv_aware routing).
//
// The tree reports each key it publishes and each it evicts to a KvEventObserver (at
// most one, set on the KvManager). KvEventLog is the observer a rank uses: it coalesces
// what happened since its last Take into one KvEventDelta whose order of application —
// evicted keys first, then committed ones — gives the tree's current key set:
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
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace lockstep::kv {

class KvEventObserver {
 public:
  virtual ~KvEventObserver() = default;
  // `key` entered the tree (a block was published under it).
  virtual void OnCommitted(uint64_t key) = 0;
  // `key` left the tree (its block was evicted).
  virtual void OnEvicted(uint64_t key) = 0;
};

// What changed in one rank's tree over some interval, coalesced (see above).
struct KvEventDelta {
  std::vector<uint64_t> committed;
  std::vector<uint64_t> evicted;
  bool empty() const { return committed.empty() && evicted.empty(); }
};

class KvEventLog final : public KvEventObserver {
 public:
  void OnCommitted(uint64_t key) override { Record(key, /*committed=*/true); }
  void OnEvicted(uint64_t key) override { Record(key, /*committed=*/false); }

  // The delta since the previous Take (keys in the order first touched); starts over.
  KvEventDelta Take();
  bool empty() const { return order_.empty(); }

 private:
  struct Touch {
    bool held_before = false;  // in the tree at the previous Take
    bool held_now = false;
  };
  void Record(uint64_t key, bool committed);

  absl::flat_hash_map<uint64_t, Touch> touched_;
  std::vector<uint64_t> order_;  // keys of touched_, first touch first
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

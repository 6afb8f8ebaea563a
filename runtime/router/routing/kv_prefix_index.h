// The router's index of where prompt prefixes are cached: block-hash key
// (kvcache/prefix_hash.h) -> the (instance, rank) pairs that hold that block, and in
// which of their tiers (kvcache/kv_tiers.h): the device pool's radix tree, the host
// tier, the disk tier. Fed by the KV events each rank publishes; read by the kv_aware
// policy, which weighs a block by the best tier that holds it.
//
// Events of one rank (a *source*) are batches numbered 1, 2, ... per incarnation (an
// instance restart starts a new, larger incarnation whose cache is empty; batches and
// snapshots of an older incarnation are ignored). A batch applies its evicted keys,
// then its committed keys, and per lower tier its removed keys, then its stored ones
// (each tier's set is its own; the publisher coalesces a step's events so that order gives
// the rank's state: a key committed then evicted within a batch appears in neither
// list; one evicted then committed again, only in `committed`). A batch is applied
// only in order; a gap, or a batch of an unknown incarnation that does not start at 1,
// drops everything the source had and marks it *out of sync*: its batches are ignored
// until a snapshot (all its keys as of some batch number) arrives.
//
// Memory is bounded: at most `max_keys` keys, least recently committed or matched
// dropped first (with all their holders). Dropping only loses routing hints: a key
// the index forgets is at worst recomputed, never trusted wrongly (workers compare
// tokens on reuse).
//
// Thread safety: thread-safe (one mutex; callers never hold it across calls).
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_PREFIX_INDEX_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_PREFIX_INDEX_H_

#include <cstdint>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace lockstep::router {

// Where a rank holds a block: its device pool, or the host or disk tier below it.
enum class KvTier : uint8_t { kDevice = 0, kHost = 1, kDisk = 2 };

// Keys one rank's tiers gained and lost since its previous batch.
struct KvEventBatch {
  std::string instance;
  int32_t rank = 0;
  uint64_t incarnation = 0;         // > 0; grows when the instance restarts (its start time)
  uint64_t seq = 0;                 // 1 for the first batch of an incarnation
  std::vector<uint64_t> committed;  // the device tier
  std::vector<uint64_t> evicted;
  std::vector<uint64_t> host_stored;
  std::vector<uint64_t> host_removed;
  std::vector<uint64_t> disk_stored;
  std::vector<uint64_t> disk_removed;
};

// Every key one rank holds per tier, as of its batch `seq` (0: before any batch).
struct KvSnapshot {
  std::string instance;
  int32_t rank = 0;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  std::vector<uint64_t> keys;  // the device tier
  std::vector<uint64_t> host_keys;
  std::vector<uint64_t> disk_keys;
};

// How many leading blocks of a chain one rank holds in any tier, and of those how many
// only below the device (each block counted in the best tier holding it).
struct KvPrefixMatch {
  std::string instance;
  int32_t rank = 0;
  int64_t blocks = 0;
  int64_t host_blocks = 0;
  int64_t disk_blocks = 0;
};

// One source as the index sees it.
struct KvSourceStats {
  std::string instance;
  int32_t rank = 0;
  int64_t keys = 0;
  bool in_sync = false;
};

class KvPrefixIndex {
 public:
  struct Options {
    size_t max_keys = 1 << 20;
  };
  explicit KvPrefixIndex(Options options);

  // Applies a batch; returns false when the source is (now) out of sync and needs a
  // snapshot.
  bool Apply(const KvEventBatch& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces everything the source holds; it is in sync at `seq` afterwards.
  void ApplySnapshot(const KvSnapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_);
  // The instance left (or restarted without telling): forget all its ranks.
  void RemoveInstance(const std::string& instance) ABSL_LOCKS_EXCLUDED(mu_);

  // For each source holding chain[0] in any tier, the number of leading keys of `chain`
  // it holds in any tier, with the host and disk share (sorted by instance, then
  // rank). Marks the matched keys recently used.
  std::vector<KvPrefixMatch> Match(absl::Span<const uint64_t> chain) ABSL_LOCKS_EXCLUDED(mu_);

  bool NeedsSnapshot(const std::string& instance, int32_t rank) const ABSL_LOCKS_EXCLUDED(mu_);
  // The keys the index holds for one rank in one tier, sorted (tests, debugging).
  std::vector<uint64_t> KeysOf(const std::string& instance, int32_t rank,
                               KvTier tier = KvTier::kDevice) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every source with keys or awaiting a snapshot, sorted by instance, then rank.
  std::vector<KvSourceStats> Sources() const ABSL_LOCKS_EXCLUDED(mu_);
  // Distinct keys held (in any tier).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // Gaps seen since construction (each put a source out of sync).
  int64_t resyncs() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using SourceId = int32_t;
  struct Source {
    std::string instance;
    int32_t rank = 0;
    uint64_t incarnation = 0;
    uint64_t seq = 0;  // last applied
    bool in_sync = false;
    absl::flat_hash_map<uint64_t, uint8_t> keys;  // key -> the tiers holding it (bit 1 << tier)
  };
  struct Entry {
    std::vector<SourceId> holders;  // small: ranks holding the block
    std::list<uint64_t>::iterator lru;
  };

  SourceId SourceOf(const std::string& instance, int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Source* FindSource(const std::string& instance, int32_t rank) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Add(SourceId source, uint64_t key, KvTier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(SourceId source, uint64_t key, KvTier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddAll(SourceId source, absl::Span<const uint64_t> keys, KvTier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveAll(SourceId source, absl::Span<const uint64_t> keys, KvTier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Clear(SourceId source) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictOverflow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<Source> sources_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::string, int32_t>, SourceId> source_ids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);  // front: least recently used
  int64_t resyncs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_PREFIX_INDEX_H_

// KvPool: one KV pool of a rank (the target pool or the draft pool). It owns the
// blocks (BlockPool), the prefix tree (RadixTree) and the caches of the requests that
// have one here, by request id, and keeps refcounts consistent across them: a block's
// refcount is the number of block tables holding it plus one if it is a tree node.
//
// Pool-local only: pairing, generations and the one release path across pools live in
// KvManager. Growth is planned first (PlanResize: every check, nothing changes) and then
// applied (ApplyResize: cannot fail), so the manager can make a resize of two pools
// atomic.
//
// Cost: growth by one block and Close are O(blocks touched) and allocate nothing
// (block tables keep their memory: closed caches are recycled), except with tiers:
// then a block that becomes evictable is copied down (kv_tiers.h).
//
// Thread safety: not thread-safe; owned by the executor thread (through KvManager).
#ifndef LOCKSTEP_KVCACHE_KV_POOL_H_
#define LOCKSTEP_KVCACHE_KV_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_hash.h"
#include "kvcache/block_pool.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_tiers.h"
#include "kvcache/kv_types.h"
#include "kvcache/memory_kind.h"
#include "kvcache/radix_tree.h"

namespace lockstep::kv {

// Per-block metadata budget (BlockPool::Meta + RadixTree::Node); checked statically.
inline constexpr size_t kMaxMetadataBytesPerBlock = 64;

class KvPool {
 public:
  struct Options {
    const char* name = "target";  // in messages: "target" or "draft"
    PoolConfig config;
    // Blocks set aside for the dummy (the highest block ids).
    int32_t reserved_blocks = 0;
    RequestId dummy_id{-1};
    BlockHasher hasher = &BlockHash;
  };

  // A checked resize, ready to apply. Valid until the pool changes.
  struct ResizePlan {
    KvCache* cache = nullptr;
    KvCache::Lengths lengths;
  };

  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const Options& options,
                                                        BlockAllocator* allocator);

  const char* name() const { return name_; }
  const BlockLayout& layout() const { return blocks_->layout(); }
  int tokens_per_block() const { return layout().tokens_per_block; }
  bool prefix_reuse() const { return prefix_reuse_; }
  std::byte* storage() const { return blocks_->storage(); }
  MemoryKind memory_kind() const { return blocks_->memory_kind(); }
  BlockCopier* copier() const { return blocks_->copier(); }
  int32_t num_blocks() const { return blocks_->num_blocks(); }
  // Tokens the whole pool holds; no cache's capacity can exceed it.
  int64_t max_tokens() const { return int64_t{num_blocks()} * tokens_per_block(); }

  // Full blocks of `tokens`, at most `max_blocks`, a new cache would reuse (0 with
  // reuse off). `keys`: the keys of the leading blocks of `tokens` when known (a
  // request's PrefixKeys under this pool's salt; RadixTree::Match). Changes nothing.
  int64_t ProbeBlocks(absl::Span<const int32_t> tokens, int64_t max_blocks,
                      absl::Span<const uint64_t> keys = {}) const;

  // Creates an active cache for `id` (which must have none) reusing the first
  // `reused_blocks` full blocks of `prompt` (<= ProbeBlocks); all lengths start at the
  // reused length. Copy-free: the reused blocks gain a reference. `keys` as for
  // ProbeBlocks.
  KvCache& CreateCache(RequestId id, uint64_t generation, absl::Span<const int32_t> prompt,
                       int64_t reused_blocks, absl::Span<const uint64_t> keys = {});
  // The same, or null, changing nothing, when `id` already has a cache (one lookup by
  // id both checks and inserts).
  KvCache* TryCreateCache(RequestId id, uint64_t generation, absl::Span<const int32_t> prompt,
                          int64_t reused_blocks, absl::Span<const uint64_t> keys = {});

  KvCache* Find(RequestId id);
  const KvCache* Find(RequestId id) const;

  // Checks a resize of `id`'s cache: the length rules (KvCache::ResolveResize), then
  // ResourceExhausted when growth needs more blocks than free + evictable (+ the
  // dummy reserve for the dummy). NotFound without a cache. Changes nothing.
  absl::StatusOr<ResizePlan> PlanResize(RequestId id, std::optional<int64_t> capacity,
                                        std::optional<int64_t> history);
  // The same for a cache of this pool the caller already holds (no lookup by id).
  absl::StatusOr<ResizePlan> PlanResize(KvCache& cache, std::optional<int64_t> capacity,
                                        std::optional<int64_t> history);
  // Applies a plan from PlanResize: allocates (evicting LRU tree blocks when the free
  // list is empty) or frees tail blocks.
  void ApplyResize(const ResizePlan& plan);

  // Whether `id`'s cache could grow by `tokens` (a new cache of `tokens` when `id` has
  // none).
  bool CanGrow(RequestId id, int64_t tokens) const;
  // The same for a cache of this pool the caller already holds.
  bool CanGrow(const KvCache& cache, int64_t tokens) const;

  // Publishes `cache`'s full blocks within tokens[0, min(size, history)) to the tree and
  // raises committed to the last full block. A block whose prefix is already published
  // by another block (or collides) stops publishing for this cache; the blocks stay
  // private. Reuse off or the dummy: only committed moves.
  void Commit(KvCache& cache, absl::Span<const int32_t> tokens);
  // The same where the keys of blocks [first_key_block, first_key_block + keys.size())
  // are known (their prefix-hash chain: an onboard fetched them by it), not rehashed.
  void Commit(KvCache& cache, absl::Span<const int32_t> tokens, absl::Span<const uint64_t> keys,
              int64_t first_key_block);

  // Closes `id`'s cache: drops its block references (deepest first, so the LRU order
  // invariant of RadixTree holds). Returns false when there is none.
  bool Close(RequestId id);

  // Every id with a cache here, ascending.
  std::vector<RequestId> Ids() const;
  int64_t num_caches() const { return static_cast<int64_t>(by_id_.size()); }
  PoolStats Stats() const;
  int64_t evicted_blocks() const { return evicted_blocks_; }
  int32_t ref_count(BlockId block) const { return blocks_->ref_count(block); }
  const RadixTree& tree() const { return tree_; }
  // The tree reports its keys to `observer` (kv_events.h); not owned, null: nobody.
  void set_event_observer(KvEventObserver* observer) { tree_.set_observer(observer); }
  // Tiers below this pool (kv_tiers.h; not owned, null: none): told each tree block that
  // becomes evictable (to copy it down) and each evicted block before its reuse.
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }

  // Appends one line per violation, each starting with `prefix`: caches whose id is not
  // in `owners`, lengths, block-table coverage, refcounts, the free-list partition, the
  // tree structure.
  void AuditInto(const std::string& prefix, const absl::flat_hash_set<RequestId>& owners,
                 std::vector<std::string>* out) const;

 private:
  KvPool(const Options& options, std::unique_ptr<BlockPool> blocks);

  int64_t Available(bool for_dummy) const {
    return blocks_->num_available(for_dummy) + tree_.num_evictable();
  }
  // CanGrow of a cache with `capacity` tokens in `have` blocks.
  bool CanGrowFrom(int64_t capacity, int64_t have, bool for_dummy, int64_t tokens) const;
  BlockId AllocateBlock(bool for_dummy);
  void Reference(BlockId block);
  void Unreference(BlockId block);

  const char* const name_;
  const bool prefix_reuse_;
  const RequestId dummy_id_;
  std::unique_ptr<BlockPool> blocks_;
  RadixTree tree_;
  // Caches live in `slots_` and are recycled through `free_slots_`; `by_id_` is never
  // iterated where order matters.
  std::vector<std::unique_ptr<KvCache>> slots_;
  std::vector<int32_t> free_slots_;
  absl::flat_hash_map<RequestId, int32_t> by_id_;
  int64_t evicted_blocks_ = 0;
  KvTiers* tiers_ = nullptr;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_POOL_H_

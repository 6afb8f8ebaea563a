// RadixTree: the published full blocks of one pool, for prefix reuse. A node is a
// block (node b is block b); its key is BlockHash(parent key, its tokens), so one key
// names a whole prefix and lookup is one hash-map probe per block. A probe hit counts
// only if the node's parent and stored tokens match too, so a hash collision can never
// hand out another prefix's KV.
//
// Each node pins its block (the owner, KvPool, holds one reference for it). A node whose
// block nobody else references is *evictable*; evictable nodes sit in an LRU list, the
// least recently released at the front.
//
// Invariant (kept by KvPool): a cache references a root chain of nodes, so the
// evictable nodes are closed under "child of", and the owner marks a chain evictable
// deepest node first. Hence every evictable node comes after all its children in the
// LRU list, the front is always a leaf, and EvictLru is O(1).
//
// Thread safety: not thread-safe; owned by the executor thread (through KvPool).
#ifndef LOCKSTEP_KVCACHE_RADIX_TREE_H_
#define LOCKSTEP_KVCACHE_RADIX_TREE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_events.h"

namespace lockstep::kv {

class RadixTree {
 public:
  // Per-node metadata. Kept small: see kMaxMetadataBytesPerBlock in kv_pool.h.
  struct Node {
    uint64_t key = 0;
    int32_t parent = -1;  // kRoot for a first block
    int32_t num_children = 0;
    int32_t lru_prev = -1;
    int32_t lru_next = -1;
    bool in_tree = false;
    bool evictable = false;
  };

  static constexpr BlockId kRoot = BlockId(-1);

  // `hasher` is BlockHash except in tests that force collisions.
  RadixTree(int32_t num_blocks, int tokens_per_block, uint64_t salt,
            BlockHasher hasher = &BlockHash);

  int tokens_per_block() const { return tokens_per_block_; }

  // Told every key that enters (Insert) or leaves (EvictLru) the tree; not owned, null:
  // nobody.
  void set_observer(KvEventObserver* observer) { observer_ = observer; }

  // Walks the full blocks of `tokens` (at most `max_blocks`) down from the root and
  // calls `visit` for each matching node, in order. Returns the number matched.
  int64_t Match(absl::Span<const int32_t> tokens, int64_t max_blocks,
                absl::FunctionRef<void(BlockId)> visit) const;
  // The same where `keys` are the keys of the leading blocks of `tokens` (a request's
  // PrefixKeys, made with this tree's salt and block size): those blocks are not hashed
  // again, the ones past them are. A wrong key only misses (the parent and tokens are
  // compared on every hit).
  int64_t Match(absl::Span<const int32_t> tokens, absl::Span<const uint64_t> keys,
                int64_t max_blocks, absl::FunctionRef<void(BlockId)> visit) const;

  // Publishes `block` holding `tokens` (exactly tokens_per_block) as a child of `parent`
  // (kRoot or a node that is not evictable). Returns false, changing nothing, when the
  // key is taken: the same prefix is already published by another block, or a
  // different prefix collides on the key.
  bool Insert(BlockId parent, BlockId block, absl::Span<const int32_t> tokens);
  // The same with the block's key already known: hasher(parent's key, tokens), which
  // the caller computed (checked in debug builds; the audit checks every node's key).
  bool Insert(BlockId parent, BlockId block, absl::Span<const int32_t> tokens, uint64_t key);

  bool Contains(BlockId block) const { return nodes_[block.value()].in_tree; }
  bool IsEvictable(BlockId block) const { return nodes_[block.value()].evictable; }
  BlockId parent(BlockId block) const { return BlockId(nodes_[block.value()].parent); }
  // A published block's key, its parent's key (the root key for a first block) and its
  // tokens: what names it below the device (kv_tiers.h).
  uint64_t key(BlockId block) const { return nodes_[block.value()].key; }
  uint64_t parent_key(BlockId block) const { return KeyOf(parent(block)); }
  absl::Span<const int32_t> tokens(BlockId block) const { return TokensOf(block.value()); }

  // Moves a node to / off the back of the LRU list (its block lost its last / gained a
  // first non-tree reference).
  void MarkEvictable(BlockId block);
  void MarkInUse(BlockId block);

  // Removes the front of the LRU list from the tree and returns its block, which the
  // caller must unpin. nullopt when nothing is evictable.
  std::optional<BlockId> EvictLru();

  int32_t num_nodes() const { return num_nodes_; }
  int32_t num_evictable() const { return num_evictable_; }

  // Evictable nodes, front (next to evict) first. For audits and tests; allocates.
  std::vector<BlockId> LruOrder() const;

  // Appends one line per broken structural invariant, each starting with `prefix`.
  void AuditInto(const std::string& prefix, std::vector<std::string>* out) const;

 private:
  bool InsertKeyed(BlockId parent, BlockId block, absl::Span<const int32_t> tokens, uint64_t key);
  uint64_t KeyOf(BlockId parent) const {
    return parent == kRoot ? root_key_ : nodes_[parent.value()].key;
  }
  absl::Span<const int32_t> TokensOf(int32_t block) const {
    return absl::MakeConstSpan(tokens_).subspan(static_cast<size_t>(block) * tokens_per_block_,
                                                tokens_per_block_);
  }
  void Unlink(int32_t block);

  const int tokens_per_block_;
  const uint64_t root_key_;
  const BlockHasher hasher_;
  KvEventObserver* observer_ = nullptr;
  std::vector<Node> nodes_;
  // The tokens of each published block (tokens_per_block per block), compared on every
  // hit. Key storage, not per-block metadata.
  std::vector<int32_t> tokens_;
  absl::flat_hash_map<uint64_t, int32_t> by_key_;  // never iterated where order matters
  int32_t num_nodes_ = 0;
  int32_t num_evictable_ = 0;
  int32_t lru_head_ = -1;
  int32_t lru_tail_ = -1;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_RADIX_TREE_H_

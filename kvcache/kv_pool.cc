#include "kvcache/kv_pool.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"

namespace lockstep::kv {

static_assert(sizeof(BlockPool::Meta) + sizeof(RadixTree::Node) <= kMaxMetadataBytesPerBlock,
              "per-block metadata exceeds its budget");

absl::StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const Options& options,
                                                       BlockAllocator* allocator) {
  RETURN_IF_ERROR(options.config.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<BlockPool> blocks,
                   BlockPool::Create(options.config.layout, options.config.num_blocks,
                                     options.reserved_blocks, allocator));
  return std::unique_ptr<KvPool>(new KvPool(options, std::move(blocks)));
}

KvPool::KvPool(const Options& options, std::unique_ptr<BlockPool> blocks)
    : name_(options.name),
      prefix_reuse_(options.config.enable_prefix_reuse),
      dummy_id_(options.dummy_id),
      blocks_(std::move(blocks)),
      tree_(blocks_->num_blocks(), blocks_->layout().tokens_per_block, options.config.reuse_salt,
            options.hasher) {}

int64_t KvPool::ProbeBlocks(absl::Span<const int32_t> tokens, int64_t max_blocks,
                            absl::Span<const uint64_t> keys) const {
  if (!prefix_reuse_) return 0;
  return tree_.Match(tokens, keys, max_blocks, [](BlockId) {});
}

KvCache& KvPool::CreateCache(RequestId id, uint64_t generation, absl::Span<const int32_t> prompt,
                             int64_t reused_blocks, absl::Span<const uint64_t> keys) {
  KvCache* cache = TryCreateCache(id, generation, prompt, reused_blocks, keys);
  LOCKSTEP_CHECK(cache != nullptr) << "request " << id << " already has a cache";
  return *cache;
}

KvCache* KvPool::TryCreateCache(RequestId id, uint64_t generation, absl::Span<const int32_t> prompt,
                                int64_t reused_blocks, absl::Span<const uint64_t> keys) {
  const auto [it, inserted] = by_id_.try_emplace(id, -1);
  if (!inserted) return nullptr;
  int32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<int32_t>(slots_.size());
    slots_.push_back(std::make_unique<KvCache>());
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  it->second = slot;
  KvCache& cache = *slots_[slot];
  cache.Reset(id, generation);
  if (reused_blocks > 0) {
    LOCKSTEP_CHECK(prefix_reuse_) << "reuse requested from a pool without prefix reuse";
    const int64_t matched = tree_.Match(prompt, keys, reused_blocks, [&](BlockId block) {
      Reference(block);
      cache.PushBlock(block);
      cache.AddTreeBlock();
    });
    LOCKSTEP_CHECK(matched == reused_blocks)
        << "request " << id << " reuses " << matched << " blocks, planned " << reused_blocks;
    const int64_t tokens = reused_blocks * tokens_per_block();
    cache.SetLengths({.capacity = tokens, .history = tokens});
    cache.RaiseCommitted(tokens);
  }
  return &cache;
}

KvCache* KvPool::Find(RequestId id) {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : slots_[it->second].get();
}

const KvCache* KvPool::Find(RequestId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : slots_[it->second].get();
}

absl::StatusOr<KvPool::ResizePlan> KvPool::PlanResize(RequestId id, std::optional<int64_t> capacity,
                                                      std::optional<int64_t> history) {
  KvCache* cache = Find(id);
  if (cache == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("request ", id.value(), " has no cache in the ", name_, " pool"));
  }
  return PlanResize(*cache, capacity, history);
}

absl::StatusOr<KvPool::ResizePlan> KvPool::PlanResize(KvCache& cache,
                                                      std::optional<int64_t> capacity,
                                                      std::optional<int64_t> history) {
  const RequestId id = cache.id();
  absl::StatusOr<KvCache::Lengths> resolved = cache.ResolveResize(capacity, history);
  if (!resolved.ok()) {
    // The InvalidArgument messages are part of the contract and stay exact.
    if (resolved.status().code() != absl::StatusCode::kFailedPrecondition) {
      return resolved.status();
    }
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " pool: ", resolved.status().message()));
  }
  const KvCache::Lengths lengths = *resolved;
  if (lengths.capacity > max_tokens()) {  // also keeps BlocksFor from overflowing
    return absl::ResourceExhaustedError(absl::StrCat(name_, " pool: request ", id.value(),
                                                     " asks for capacity ", lengths.capacity,
                                                     ", the pool holds ", max_tokens(), " tokens"));
  }
  const int64_t needed = layout().BlocksFor(lengths.capacity) - cache.num_blocks();
  if (needed > 0 && needed > Available(id == dummy_id_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, " pool: request ", id.value(), " needs ", needed, " more blocks for capacity ",
        lengths.capacity, ", ", Available(id == dummy_id_), " are free or evictable"));
  }
  return ResizePlan{.cache = &cache, .lengths = lengths};
}

void KvPool::ApplyResize(const ResizePlan& plan) {
  KvCache& cache = *plan.cache;
  const int64_t target_blocks = layout().BlocksFor(plan.lengths.capacity);
  const bool for_dummy = cache.id() == dummy_id_;
  while (cache.num_blocks() < target_blocks) cache.PushBlock(AllocateBlock(for_dummy));
  // Never below the tree prefix: capacity >= history >= committed covers it.
  while (cache.num_blocks() > target_blocks) Unreference(cache.PopBlock());
  cache.SetLengths(plan.lengths);
}

bool KvPool::CanGrow(RequestId id, int64_t tokens) const {
  const KvCache* cache = Find(id);
  return cache != nullptr ? CanGrow(*cache, tokens) : CanGrowFrom(0, 0, id == dummy_id_, tokens);
}

bool KvPool::CanGrow(const KvCache& cache, int64_t tokens) const {
  return CanGrowFrom(cache.capacity(), cache.num_blocks(), cache.id() == dummy_id_, tokens);
}

bool KvPool::CanGrowFrom(int64_t capacity, int64_t have, bool for_dummy, int64_t tokens) const {
  if (tokens > max_tokens() - capacity) return false;
  const int64_t needed = layout().BlocksFor(capacity + std::max<int64_t>(tokens, 0)) - have;
  return needed <= 0 || needed <= Available(for_dummy);
}

void KvPool::Commit(KvCache& cache, absl::Span<const int32_t> tokens) {
  Commit(cache, tokens, {}, 0);
}

void KvPool::Commit(KvCache& cache, absl::Span<const int32_t> tokens,
                    absl::Span<const uint64_t> keys, int64_t first_key_block) {
  const int tpb = tokens_per_block();
  const int64_t full =
      std::min<int64_t>(static_cast<int64_t>(tokens.size()), cache.history()) / tpb;
  if (prefix_reuse_ && cache.id() != dummy_id_) {
    const int64_t keys_end = first_key_block + static_cast<int64_t>(keys.size());
    for (int64_t i = cache.tree_blocks(); i < full && !cache.publishing_stopped(); ++i) {
      const BlockId parent = i == 0 ? RadixTree::kRoot : cache.blocks()[i - 1];
      const BlockId block = cache.blocks()[i];
      const absl::Span<const int32_t> block_tokens =
          tokens.subspan(static_cast<size_t>(i) * tpb, tpb);
      const bool inserted =
          i >= first_key_block && i < keys_end
              ? tree_.Insert(parent, block, block_tokens, keys[i - first_key_block])
              : tree_.Insert(parent, block, block_tokens);
      if (inserted) {
        blocks_->AddRef(block);  // the tree's pin
        cache.AddTreeBlock();
      } else {
        cache.StopPublishing();
      }
    }
  }
  cache.RaiseCommitted(full * tpb);
}

bool KvPool::Close(RequestId id) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  const int32_t slot = it->second;
  by_id_.erase(it);
  KvCache& cache = *slots_[slot];
  const absl::Span<const BlockId> table = cache.blocks();
  for (auto b = table.rbegin(); b != table.rend(); ++b) Unreference(*b);
  cache.ClearBlocks();
  cache.set_status(CacheStatus::kClosed);
  free_slots_.push_back(slot);
  return true;
}

BlockId KvPool::AllocateBlock(bool for_dummy) {
  if (std::optional<BlockId> block = blocks_->Allocate(for_dummy)) return *block;
  const std::optional<BlockId> victim = tree_.EvictLru();
  LOCKSTEP_CHECK(victim.has_value()) << "allocation without a free or evictable block";
  ++evicted_blocks_;
  LOCKSTEP_CHECK(blocks_->Unref(*victim) == 0) << "evicted block " << *victim << " in use";
  if (tiers_ != nullptr) tiers_->BeforeReuse(*victim);
  const std::optional<BlockId> block = blocks_->Allocate(for_dummy);
  LOCKSTEP_CHECK(block.has_value());
  return *block;
}

void KvPool::Reference(BlockId block) {
  if (tree_.IsEvictable(block)) tree_.MarkInUse(block);
  blocks_->AddRef(block);
}

void KvPool::Unreference(BlockId block) {
  if (blocks_->Unref(block) == 1 && tree_.Contains(block)) {
    tree_.MarkEvictable(block);
    if (tiers_ != nullptr) {
      const absl::Span<const int32_t> tokens = tree_.tokens(block);
      tiers_->OnEvictable(block, TierBlockMeta{.key = tree_.key(block),
                                               .parent_key = tree_.parent_key(block),
                                               .tokens = {tokens.begin(), tokens.end()}});
    }
  }
}

std::vector<RequestId> KvPool::Ids() const {
  std::vector<RequestId> ids;
  ids.reserve(by_id_.size());
  for (const auto& [id, slot] : by_id_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

PoolStats KvPool::Stats() const {
  PoolStats stats;
  stats.total_blocks = blocks_->num_blocks();
  stats.free_blocks = blocks_->num_free();
  stats.reserved_blocks = blocks_->num_reserved_free();
  stats.cached_blocks = tree_.num_evictable();
  stats.used_blocks =
      stats.total_blocks - stats.free_blocks - stats.reserved_blocks - stats.cached_blocks;
  stats.num_caches = num_caches();
  return stats;
}

void KvPool::AuditInto(const std::string& prefix, const absl::flat_hash_set<RequestId>& owners,
                       std::vector<std::string>* out) const {
  const int32_t n = blocks_->num_blocks();
  // Expected refcount of every block: table references plus the tree pin.
  std::vector<int32_t> expected(static_cast<size_t>(n), 0);
  for (int32_t b = 0; b < n; ++b) {
    if (tree_.Contains(BlockId(b))) expected[b] = 1;
  }
  for (const RequestId id : Ids()) {
    const KvCache& cache = *Find(id);
    const std::string who =
        absl::StrCat(prefix, "request ", id.value(), " (generation ", cache.generation(), "): ");
    if (!owners.contains(id)) {
      out->push_back(
          absl::StrCat(who, "cache is owned by no live request, transfer claim or current dummy"));
    }
    if (cache.status() == CacheStatus::kClosed)
      out->push_back(absl::StrCat(who, "closed cache is still indexed"));
    if (!(0 <= cache.committed() && cache.committed() <= cache.history() &&
          cache.history() <= cache.capacity())) {
      out->push_back(absl::StrCat(who, "committed ", cache.committed(), " <= history ",
                                  cache.history(), " <= capacity ", cache.capacity(),
                                  " is broken"));
    }
    if (cache.num_blocks() != layout().BlocksFor(cache.capacity())) {
      out->push_back(absl::StrCat(who, cache.num_blocks(), " blocks do not cover capacity ",
                                  cache.capacity(), " exactly"));
    }
    if (static_cast<int64_t>(cache.tree_blocks()) * tokens_per_block() > cache.committed()) {
      out->push_back(absl::StrCat(who, cache.tree_blocks(), " tree blocks exceed committed ",
                                  cache.committed()));
    }
    for (int32_t i = 0; i < cache.num_blocks(); ++i) {
      const BlockId block = cache.blocks()[i];
      if (block.value() < 0 || block.value() >= n) {
        out->push_back(absl::StrCat(who, "block ", block.value(), " is outside the pool"));
        continue;
      }
      ++expected[block.value()];
      if (blocks_->is_reserved(block) && id != dummy_id_) {
        out->push_back(absl::StrCat(who, "holds dummy-reserved block ", block.value()));
      }
      const bool in_prefix = i < cache.tree_blocks();
      if (in_prefix != tree_.Contains(block)) {
        out->push_back(absl::StrCat(who, "block ", block.value(), " at index ", i, " is ",
                                    in_prefix ? "not " : "", "a tree node, expected ",
                                    in_prefix ? "one" : "none"));
      } else if (in_prefix &&
                 tree_.parent(block) != (i == 0 ? RadixTree::kRoot : cache.blocks()[i - 1])) {
        out->push_back(absl::StrCat(who, "tree block ", block.value(),
                                    " does not continue the table's chain"));
      }
    }
  }
  for (int32_t b = 0; b < n; ++b) {
    const BlockId block(b);
    if (blocks_->ref_count(block) != expected[b]) {
      out->push_back(absl::StrCat(prefix, "block ", b, " has refcount ", blocks_->ref_count(block),
                                  ", expected ", expected[b],
                                  " (block-table references plus tree pin)"));
    }
    if (tree_.Contains(block) && tree_.IsEvictable(block) != (expected[b] == 1)) {
      out->push_back(absl::StrCat(prefix, "tree block ", b, " is ",
                                  tree_.IsEvictable(block) ? "" : "not ", "evictable with ",
                                  expected[b] - 1, " cache references"));
    }
  }
  blocks_->AuditInto(prefix, out);
  tree_.AuditInto(prefix, out);
}

}  // namespace lockstep::kv

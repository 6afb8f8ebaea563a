// Value types of the KV manager's API (kv_manager.h): pool kinds, configs, cache
// info, deferred updates, stats. Split out so the pool internals can use them; include
// kv_manager.h, which includes this file.
#ifndef LOCKSTEP_KVCACHE_KV_TYPES_H_
#define LOCKSTEP_KVCACHE_KV_TYPES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"
#include "kvcache/tier_config.h"

namespace lockstep::kv {

enum class PoolKind { kTarget, kDraft };
enum class DraftMode { kNone, kPaired, kUnpaired };
enum class CacheStatus { kActive, kSuspended, kClosed };

const char* PoolKindName(PoolKind pool);
const char* DraftModeName(DraftMode mode);

struct PoolConfig {
  BlockLayout layout;
  int32_t num_blocks = 0;
  // Publish full blocks to the radix tree and reuse committed prefixes.
  bool enable_prefix_reuse = true;
  // Mixed into every block hash: one value per model / LoRA, so that two models never
  // share blocks.
  uint64_t reuse_salt = 0;

  absl::Status Validate() const;
};

struct KvManagerConfig {
  PoolConfig target;
  DraftMode draft_mode = DraftMode::kNone;
  PoolConfig draft;  // ignored with DraftMode::kNone
  // Tokens of KV set aside in every pool for the pad dummy (0: nothing reserved, the
  // dummy competes for free blocks like any request).
  int32_t dummy_reserved_tokens = 0;
  // Host and disk tiers below the target pool (off by default; draft_mode none only).
  TierConfig tiers;

  absl::Status Validate() const;
};

struct CacheInfo {
  uint64_t generation = 0;
  int64_t committed = 0;
  int64_t history = 0;
  int64_t capacity = 0;
  CacheStatus status = CacheStatus::kActive;
};

// A resize computed for a step, applied later (possibly after the step was deferred).
struct CacheUpdate {
  RequestId id;
  PoolKind pool = PoolKind::kTarget;
  uint64_t generation = 0;          // the cache it was computed for
  std::optional<int64_t> capacity;  // nullopt: keep the current capacity
  int64_t history = 0;
};

// The caches of one request and their block tables, copied (KvManager::BlockRefsOf):
// what the engine reads and writes for a sequence in a step (model_engine.h), and what
// a KV transfer sends from or receives into (transceiver.h).
struct BlockRefs {
  RequestId id;
  uint64_t generation = 0;        // target cache generation (identity of the cache)
  std::vector<BlockId> blocks;    // target pool block table
  uint64_t draft_generation = 0;  // 0: no draft cache
  std::vector<BlockId> draft_blocks;
};

enum class UpdateResult { kApplied, kStale };

struct PoolStats {
  int32_t total_blocks = 0;
  int32_t free_blocks = 0;      // on the free list (excludes the dummy reservation)
  int32_t used_blocks = 0;      // referenced by a cache
  int32_t cached_blocks = 0;    // held only by the radix tree (reusable, evictable)
  int32_t reserved_blocks = 0;  // set aside for the dummy and not in use by it
  int64_t num_caches = 0;
  // free + used + cached + reserved == total.
};

struct ManagerStats {
  PoolStats target;
  std::optional<PoolStats> draft;
  int64_t stale_updates = 0;         // ApplyUpdate calls that returned kStale
  int64_t reused_tokens = 0;         // prefix tokens reused by CreateCache
  int64_t mirror_reused_tokens = 0;  // prefix tokens unpaired mirrors reused (AdmitMirror)
  int64_t evicted_blocks = 0;        // radix-tree blocks evicted (every pool) for growth
  int64_t onboarded_tokens = 0;      // prefix tokens CreateCache brought back from tiers
  TierStats tiers;                   // zeros without tiers
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_TYPES_H_

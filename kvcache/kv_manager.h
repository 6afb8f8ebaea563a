// KvManager: the KV pools of one rank, target and optional draft, and the only way to
// create, size and free per-request caches (docs/design.md §1, §5, §7).
//
// Pools. The target pool always exists. The draft pool is absent, *paired* (every
// target resize is applied to the draft cache of the same id atomically: if the draft
// side fails, the target is rolled back), or *unpaired* (the draft cache of a request
// is a *mirror* created at capacity 0 by AdmitMirror and sized on its own). Every pool
// has its own radix tree of committed blocks (prefix reuse): a paired draft cache reuses
// together with its target (the prefix committed in both), a mirror reuses on its own,
// never more than its target.
//
// One release path. `Release(id)` frees `id` in every pool that holds it. There is no
// per-pool free in this API, so a rollback can never leave a cache behind in a pool
// it forgot (the motivating failure, docs/design.md §1).
//
// Cache identity. Every cache gets a generation number unique for the life of the
// manager (never reused, also across pools). An update computed for a deferred step
// carries the generation it was computed for; ApplyUpdate on a cache that was closed or
// re-created since returns kStale, counts it, and changes nothing.
//
// Lengths: committed <= history <= capacity for every cache (committed: tokens whose
// full blocks are published for prefix reuse; history: tokens with valid KV; capacity:
// tokens the blocks can hold). History never decreases.
//
// Dummy. The pad dummy has a fixed id per manager (`dummy_id()`, negative). With
// `dummy_reserved_tokens > 0`, blocks for that many tokens are set aside in every pool
// at construction, used only by the dummy, so padding can never fail for lack of
// blocks.
//
// Thread safety: not thread-safe; owned by the executor thread (mutators DCHECK that
// they all run on one thread, the first that calls one). Block storage is read
// and written by the engine thread and the transfer threads under the ordering rules of
// model_engine.h and transceiver.h, never through this class.
#ifndef LOCKSTEP_KVCACHE_KV_MANAGER_H_
#define LOCKSTEP_KVCACHE_KV_MANAGER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/host_blocks.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_types.h"
#include "kvcache/memory_kind.h"
#include "kvcache/prefix_hash.h"

namespace lockstep::kv {

class KvManager {
 public:
  // `allocator` provides block storage (host memory when null). It must outlive the
  // manager and, with tiers, a copy-down the manager's destruction left running (a device
  // stuck past the tier job deadline): that copy-down keeps the target pool alive, which
  // is freed through `allocator` once it ended (tier_worker.h).
  static absl::StatusOr<std::unique_ptr<KvManager>> Create(const KvManagerConfig& config,
                                                           BlockAllocator* allocator = nullptr);
  ~KvManager();
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  const KvManagerConfig& config() const;
  bool has_draft() const { return config().draft_mode != DraftMode::kNone; }
  // The fixed id of the pad dummy.
  RequestId dummy_id() const;

  // ---- Creation. ----

  // Creates the target cache of `id` (and its draft cache when paired), active. With
  // prefix reuse on, reuses the longest committed prefix of `prompt` minus its last
  // token (copy-free, reference-counted); then committed = history = capacity = the
  // reused length. Returns that length. AlreadyExists if `id` has a target cache.
  // The dummy id is created like any id; with a reservation its blocks come from it
  // first. The dummy never reuses (its tokens are padding). With a paired draft pool the
  // reused length is the longest prefix committed in both pools that ends on a block
  // boundary of each.
  absl::StatusOr<int64_t> CreateCache(RequestId id, absl::Span<const int32_t> prompt = {});
  // The same where `keys` are `prompt`'s prefix keys (HashPrefix; a request keeps them):
  // the device tree's match and the tiers' fetch read them instead of hashing the
  // prompt. InvalidArgument, creating nothing, when they were made under another salt
  // or block size than the target pool's or for a prompt of another length (stale).
  absl::StatusOr<int64_t> CreateCache(RequestId id, absl::Span<const int32_t> prompt,
                                      const PrefixKeys& keys);

  // Unpaired draft pool only: creates the draft mirror of `id` at capacity 0, or
  // resumes it if it exists. A new mirror given the `prompt` its target cache was
  // created with (prefix reuse on, not the dummy) reuses the longest prefix of it that
  // the draft pool has committed, at most the target's history: then committed =
  // history = capacity = that length (Info tells it), and the draft model computes the
  // rest of the target's history itself before the mirror's next chunk (its KV for
  // [reused, target history) goes into blocks of its own). FailedPrecondition without
  // an unpaired draft pool; NotFound when `id` has no target cache.
  absl::Status AdmitMirror(RequestId id, absl::Span<const int32_t> prompt = {});

  // ---- Sizing. ----

  // Resizes the cache of `id` in `pool` (nullopt keeps a length). With a paired draft
  // pool, resizing the target resizes the draft cache too, atomically; resizing a
  // paired draft alone is FailedPrecondition. Errors (nothing changes):
  //   InvalidArgument("history length cannot decrease")
  //   InvalidArgument("history length cannot exceed capacity")
  //   ResourceExhausted when growth finds too few blocks (after evicting unreferenced
  //   radix-tree blocks LRU)
  //   NotFound when there is no such cache; FailedPrecondition when it is not active.
  // Shrinking frees tail blocks.
  absl::Status Resize(RequestId id, PoolKind pool, std::optional<int64_t> capacity,
                      std::optional<int64_t> history);

  // Dry run: could `id` grow by `tokens` in the target pool and (when a draft pool
  // exists) in the draft pool? For an id with no cache, asks whether a new cache of
  // `tokens` would fit. Changes nothing (evictable radix blocks count as free, and so
  // does the reservation for the dummy). `tokens <= 0` always fits.
  bool CanGrow(RequestId id, int64_t tokens) const;

  // Applies a deferred update if `update.generation` is still the live, active cache
  // of `update.id` in `update.pool`; otherwise returns kStale (counted) and changes
  // nothing (a suspended cache is not active: kStale). A valid identity with invalid
  // lengths is an error, as for Resize.
  absl::StatusOr<UpdateResult> ApplyUpdate(const CacheUpdate& update);

  // Suspends / resumes the caches of `id` in every pool (a suspended cache keeps its
  // blocks and cannot be resized). NotFound when `id` has no target cache.
  absl::Status Suspend(RequestId id);
  absl::Status Resume(RequestId id);

  // ---- Release: the only way to free a request. ----

  // Frees `id` in every pool that holds it (closes the caches; committed blocks stay
  // in the radix tree as reusable prefix). Idempotent: releasing an unknown id is a
  // no-op. Returns the number of caches closed. A closed cache leaves its pool (Has
  // turns false); its generation is never used again.
  int Release(RequestId id);

  // ---- Prefix reuse. ----

  // Publishes the full blocks of `id`'s target cache and of its draft cache (paired, or
  // an unpaired mirror) covering `tokens[0, n)` where n = min(tokens.size(), that
  // cache's history), to its pool's radix tree; raises `committed` to the last full
  // block boundary <= n. `tokens` are the sequence's tokens from position 0; the caller
  // publishes only KV that is computed in every pool. A block whose prefix another
  // block already published stays private, and so do the cache's later blocks (a
  // concurrent request with the same prefix: the first to commit publishes it, for
  // every request created after). With reuse off and for the dummy only `committed`
  // moves. NotFound when `id` has no target cache.
  absl::Status Commit(RequestId id, absl::Span<const int32_t> tokens);
  // The same where `keys` are the prefix keys of a sequence `tokens` begins (a request's
  // keys cover its context; HashPrefix): the blocks' keys are read, not hashed, in the
  // target pool and a paired draft pool of the same salt and block size. InvalidArgument
  // (nothing committed) when they were made under another salt or block size, or cover
  // fewer tokens than `tokens` holds.
  absl::Status Commit(RequestId id, absl::Span<const int32_t> tokens, const PrefixKeys& keys);

  // Read-only probe: how many tokens of `prompt` (minus its last token) a new target
  // cache would reuse (an unpaired mirror's own reuse is not part of it).
  int64_t ProbePrefix(absl::Span<const int32_t> prompt) const;
  // The same with `prompt`'s prefix keys; InvalidArgument as for CreateCache.
  absl::StatusOr<int64_t> ProbePrefix(absl::Span<const int32_t> prompt,
                                      const PrefixKeys& keys) const;
  // Extends `keys` to cover `tokens` under the target pool's salt and block size
  // (PrefixKeys::Extend): the keys CreateCache and ProbePrefix take.
  void HashPrefix(absl::Span<const int32_t> tokens, PrefixKeys* keys) const;

  // KV events (kv_events.h): the target pool's radix tree reports every key it
  // publishes and evicts to `observer`, and the tiers below it every key they store
  // and remove (not owned; must outlive the manager or be replaced; null: nobody). The
  // keys are PrefixHashChain's (prefix_hash.h) with the target pool's salt.
  void SetEventObserver(KvEventObserver* observer);

  // ---- Tiers (KvManagerConfig::tiers, docs/design.md §5.1; no-ops without tiers). ----

  // CreateCache also brings back prefix blocks the host and disk tiers hold, past what
  // the device reuses (tier_onboard.h). Their copy into fresh blocks waits until every
  // batch launched before the allocation is collected: the executor calls these after
  // each engine launch and each collect (a caller that never launches copies at once).
  void OnBatchLaunched();
  void OnBatchCollected();
  // Whether `id`'s cache still waits for its onboarding copy: it must not be scheduled.
  bool OnboardPending(RequestId id) const;
  // Waits for queued copy-downs and disk writes (tests, benchmarks); DEADLINE_EXCEEDED
  // when a job is stuck (the tiers are then off, kv_tiers.h).
  absl::Status FlushTiers();
  // At a context leg's hand-off: pins the host-tier copies of `id`'s full target blocks
  // holding `prompt` (as far as its history reaches) for its transfer claim to read
  // instead of the device blocks (tier_pins.h: the rule). Null without tiers or when
  // the host tier holds none of them. Release(id) drops the pins (after the claim
  // ended) and counts the blocks the transfer read (TierStats::served_blocks).
  // NotFound without a target cache; AlreadyExists when `id` already holds pins.
  absl::StatusOr<std::shared_ptr<const HostBlocks>> PinHostBlocks(
      RequestId id, absl::Span<const int32_t> prompt);
  // The same where `keys` are the prefix keys of a sequence `prompt` begins: the blocks'
  // keys are read, not hashed. InvalidArgument (nothing pinned) as for Commit.
  absl::StatusOr<std::shared_ptr<const HostBlocks>> PinHostBlocks(RequestId id,
                                                                  absl::Span<const int32_t> prompt,
                                                                  const PrefixKeys& keys);

  // ---- Queries. ----

  bool Has(RequestId id, PoolKind pool) const;
  std::optional<CacheInfo> Info(RequestId id, PoolKind pool) const;
  // Empty span when there is no such cache. Valid until the next mutating call.
  absl::Span<const BlockId> BlockTable(RequestId id, PoolKind pool) const;
  // Both caches of `id` with copies of their block tables; a pool without a cache of
  // `id` contributes generation 0 and an empty table.
  BlockRefs BlockRefsOf(RequestId id) const;
  // Every id with a cache in `pool`, ascending.
  std::vector<RequestId> Ids(PoolKind pool) const;
  // Every generation issued so far is below this value; caches created later get one
  // at or above it.
  uint64_t next_generation() const;

  // The pool's layout (the configured draft layout when there is no draft pool).
  const BlockLayout& layout(PoolKind pool) const;
  // Base of the pool's contiguous storage: block b starts at byte
  // Storage(pool) + b * layout(pool).BlockBytes(). Null for an absent pool. Device
  // memory when memory_kind() is kDevice: only an engine on that device may use it.
  std::byte* Storage(PoolKind pool) const;
  // The copier over the pool's storage (block_copier.h), the way everything but the
  // engine reads and writes blocks; null for an absent pool. Lives as long as the
  // manager; thread-safe (unlike the manager).
  BlockCopier* Copier(PoolKind pool) const;
  // Where every pool's storage lives (the allocator's memory kind).
  MemoryKind memory_kind() const;
  int32_t num_blocks(PoolKind pool) const;
  int32_t tokens_per_block(PoolKind pool) const { return layout(pool).tokens_per_block; }

  ManagerStats Stats() const;

  // ---- Audit (docs/design.md §7). ----

  // Every violation as one line of text (empty when clean): a cache owned by no live
  // request, claim or current dummy (`dummy_active` says whether the dummy is live);
  // committed <= history <= capacity broken; block tables not covering capacity;
  // refcounts not equal to block-table references plus radix pins; free and used
  // blocks not a partition of the pool; radix-tree structure; a draft key with no
  // target key (any draft mode); with a paired pool, a target key with no draft key or
  // a pair whose history, capacity or status differ; with tiers, KvTiers::AuditInto and
  // pending onboards whose cache is gone or no longer holds them, and host tier pins
  // held by an id that is neither live nor claimed or not adding up.
  std::vector<std::string> Audit(absl::Span<const RequestId> live_ids,
                                 absl::Span<const RequestId> claimed_ids, bool dummy_active) const;

 private:
  class Impl;
  explicit KvManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_MANAGER_H_

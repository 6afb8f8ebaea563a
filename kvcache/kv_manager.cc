#include "kvcache/kv_manager.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "common/thread_checker.h"
#include "kvcache/kv_pool.h"
#include "kvcache/tier_onboard.h"
#include "kvcache/tier_pins.h"

namespace lockstep::kv {
namespace {

constexpr RequestId kDummyId(-1);

int32_t ReservedBlocks(const PoolConfig& pool, int32_t reserved_tokens) {
  return static_cast<int32_t>(pool.layout.BlocksFor(reserved_tokens));
}

}  // namespace

// State of the manager. Pools are indexed by PoolKind; every loop over `pools` covers
// every pool that exists, which is what makes Release free an id everywhere.
class KvManager::Impl {
 public:
  KvManagerConfig config;
  // Shared with the tier worker's thread (TargetOwner): a copy-down still running after
  // the manager reads the target pool, which is then freed once it ended.
  std::shared_ptr<HostAllocator> owned_allocator;
  std::array<std::shared_ptr<KvPool>, 2> pools;
  // Tiers below the target pool; declared after `pools`, so destroyed before them.
  std::unique_ptr<TierOnboarder> onboarder;
  // Host tier pins of transfer claims (with tiers); destroyed before the tiers.
  std::unique_ptr<TierPins> pins;
  uint64_t next_generation = 1;
  int64_t stale_updates = 0;
  int64_t reused_tokens = 0;
  int64_t mirror_reused_tokens = 0;
  // The executor thread, bound on first use; checked by every mutator.
  ThreadChecker thread_checker;

  // Null for a pool that does not exist (or a PoolKind value out of range).
  KvPool* pool(PoolKind kind) const {
    const auto index = static_cast<size_t>(kind);
    return index < pools.size() ? pools[index].get() : nullptr;
  }
  KvPool& target() const { return *pools[0]; }
  KvPool* draft() const { return pools[1].get(); }
  bool paired() const { return config.draft_mode == DraftMode::kPaired; }
  bool unpaired() const { return config.draft_mode == DraftMode::kUnpaired; }

  // Whether a paired draft pool's blocks have the target's keys (same salt and size).
  bool draft_shares_keys() const {
    return paired() && draft()->tokens_per_block() == target().tokens_per_block() &&
           config.draft.reuse_salt == config.target.reuse_salt;
  }

  // OK when `keys` may stand for `prompt`'s in the target pool (PrefixKeys::CheckCovers).
  absl::Status CheckKeys(absl::Span<const int32_t> prompt, const PrefixKeys& keys) const {
    return keys.CheckCovers(config.target.reuse_salt, target().tokens_per_block(),
                            static_cast<int64_t>(prompt.size()));
  }
  // The same for keys of a sequence `tokens` begins (PrefixKeys::CheckCoversAtLeast).
  absl::Status CheckKeysAtLeast(absl::Span<const int32_t> tokens, const PrefixKeys& keys) const {
    return keys.CheckCoversAtLeast(config.target.reuse_salt, target().tokens_per_block(),
                                   static_cast<int64_t>(tokens.size()));
  }
  // KvManager::Commit with the target's keys of the leading blocks when known (checked
  // by the caller), else none.
  absl::Status Commit(RequestId id, absl::Span<const int32_t> tokens,
                      absl::Span<const uint64_t> keys);
  // KvManager::PinHostBlocks, likewise.
  absl::StatusOr<std::shared_ptr<const HostBlocks>> PinHostBlocks(RequestId id,
                                                                  absl::Span<const int32_t> prompt,
                                                                  absl::Span<const uint64_t> keys);

  // Tokens of `prompt` a new cache reuses: full blocks of the prompt minus its
  // last token, matched in the target pool and (paired) the draft pool alike. `keys`:
  // the target's keys of the prompt's leading blocks when known (checked by the caller).
  int64_t ReusableTokens(absl::Span<const int32_t> prompt, absl::Span<const uint64_t> keys) const {
    if (prompt.size() < 2) return 0;
    const absl::Span<const int32_t> limit = prompt.first(prompt.size() - 1);
    int64_t tokens = static_cast<int64_t>(limit.size());
    int64_t granule = 1;  // reuse must end on a block boundary in every pool
    for (const KvPool* p : {&target(), paired() ? draft() : nullptr}) {
      if (p == nullptr) continue;
      if (!p->prefix_reuse()) return 0;
      const int tpb = p->tokens_per_block();
      const absl::Span<const uint64_t> own =
          p == &target() || draft_shares_keys() ? keys : absl::Span<const uint64_t>();
      tokens = std::min(tokens, p->ProbeBlocks(limit, tokens / tpb, own) * tpb);
      granule = std::lcm(granule, static_cast<int64_t>(tpb));
    }
    return tokens / granule * granule;
  }

  // CreateCache with the target's keys of the prompt's leading blocks when known.
  absl::StatusOr<int64_t> CreateCache(RequestId id, absl::Span<const int32_t> prompt,
                                      absl::Span<const uint64_t> keys);
};

absl::StatusOr<std::unique_ptr<KvManager>> KvManager::Create(const KvManagerConfig& config,
                                                             BlockAllocator* allocator) {
  RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (allocator == nullptr) {
    impl->owned_allocator = std::make_shared<HostAllocator>();
    allocator = impl->owned_allocator.get();
  }
  KvPool::Options target{
      .name = "target",
      .config = config.target,
      .reserved_blocks = ReservedBlocks(config.target, config.dummy_reserved_tokens),
      .dummy_id = kDummyId};
  ASSIGN_OR_RETURN(impl->pools[0], KvPool::Create(target, allocator));
  if (config.draft_mode != DraftMode::kNone) {
    KvPool::Options draft{
        .name = "draft",
        .config = config.draft,
        .reserved_blocks = ReservedBlocks(config.draft, config.dummy_reserved_tokens),
        .dummy_id = kDummyId};
    ASSIGN_OR_RETURN(impl->pools[1], KvPool::Create(draft, allocator));
  }
  if (config.tiers.enabled()) {
    // What a copy-down reads: the target pool (its copier and slab) and the allocator
    // that frees the slab when it is owned here (the pool goes first).
    struct TargetOwner {
      std::shared_ptr<HostAllocator> allocator;
      std::shared_ptr<KvPool> pool;
    };
    auto owner = std::make_shared<const TargetOwner>(
        TargetOwner{.allocator = impl->owned_allocator, .pool = impl->pools[0]});
    ASSIGN_OR_RETURN(impl->onboarder,
                     TierOnboarder::Create(config.tiers, impl->pools[0].get(),
                                           config.target.reuse_salt, std::move(owner)));
    impl->pins = std::make_unique<TierPins>(&impl->onboarder->tiers(),
                                            config.target.layout.tokens_per_block,
                                            config.target.reuse_salt);
  }
  return std::unique_ptr<KvManager>(new KvManager(std::move(impl)));
}

KvManager::KvManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvManager::~KvManager() = default;

const KvManagerConfig& KvManager::config() const { return impl_->config; }
RequestId KvManager::dummy_id() const { return kDummyId; }

absl::StatusOr<int64_t> KvManager::CreateCache(RequestId id, absl::Span<const int32_t> prompt) {
  return impl_->CreateCache(id, prompt, {});
}

absl::StatusOr<int64_t> KvManager::CreateCache(RequestId id, absl::Span<const int32_t> prompt,
                                               const PrefixKeys& keys) {
  RETURN_IF_ERROR(impl_->CheckKeys(prompt, keys));
  return impl_->CreateCache(id, prompt, keys.keys());
}

absl::StatusOr<int64_t> KvManager::Impl::CreateCache(RequestId id, absl::Span<const int32_t> prompt,
                                                     absl::Span<const uint64_t> keys) {
  LOCKSTEP_DCHECK(thread_checker.IsOnOwnerThread());
  // The dummy never reuses: its tokens are padding.
  int64_t reused = id == kDummyId ? 0 : ReusableTokens(prompt, keys);
  KvCache* const created = target().TryCreateCache(id, next_generation, prompt,
                                                   reused / target().tokens_per_block(), keys);
  if (created == nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", id.value(), " already has a target cache"));
  }
  KvCache& cache = *created;
  ++next_generation;
  if (paired()) {
    draft()->CreateCache(id, next_generation++, prompt, reused / draft()->tokens_per_block(),
                         draft_shares_keys() ? keys : absl::Span<const uint64_t>());
  }
  if (onboarder != nullptr && id != kDummyId) reused += onboarder->Onboard(cache, prompt, keys);
  reused_tokens += reused;
  return reused;
}

absl::Status KvManager::AdmitMirror(RequestId id, absl::Span<const int32_t> prompt) {
  Impl& m = *impl_;
  LOCKSTEP_DCHECK(m.thread_checker.IsOnOwnerThread());
  if (!m.unpaired()) {
    return absl::FailedPreconditionError(
        absl::StrCat("AdmitMirror needs an unpaired draft pool; draft mode is ",
                     DraftModeName(m.config.draft_mode)));
  }
  const KvCache* target = m.target().Find(id);
  if (target == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("request ", id.value(), " has no target cache to mirror"));
  }
  if (KvCache* mirror = m.draft()->Find(id)) {
    mirror->set_status(CacheStatus::kActive);
    return absl::OkStatus();
  }
  // A new mirror reuses its own pool's committed prefix of the prompt, never past the
  // target's history: the draft then computes [reused, target history) itself, into
  // blocks of its own (it never writes a shared block).
  int64_t reused_blocks = 0;
  if (id != kDummyId && prompt.size() >= 2) {
    const int64_t limit = std::min<int64_t>(target->history(), prompt.size() - 1);
    reused_blocks = m.draft()->ProbeBlocks(prompt.first(static_cast<size_t>(limit)),
                                           limit / m.draft()->tokens_per_block());
  }
  m.draft()->CreateCache(id, m.next_generation++, prompt, reused_blocks);
  m.mirror_reused_tokens += reused_blocks * m.draft()->tokens_per_block();
  return absl::OkStatus();
}

absl::Status KvManager::Resize(RequestId id, PoolKind pool, std::optional<int64_t> capacity,
                               std::optional<int64_t> history) {
  Impl& m = *impl_;
  LOCKSTEP_DCHECK(m.thread_checker.IsOnOwnerThread());
  if (pool != PoolKind::kTarget && pool != PoolKind::kDraft) {
    return absl::InvalidArgumentError(absl::StrCat("no such pool kind: ", static_cast<int>(pool)));
  }
  if (pool == PoolKind::kDraft) {
    if (m.draft() == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("request ", id.value(), " has no draft cache: there is no draft pool"));
    }
    if (m.paired()) {
      return absl::FailedPreconditionError(absl::StrCat("the paired draft cache of request ",
                                                        id.value(), " is resized with its target"));
    }
    ASSIGN_OR_RETURN(const KvPool::ResizePlan plan, m.draft()->PlanResize(id, capacity, history));
    m.draft()->ApplyResize(plan);
    return absl::OkStatus();
  }
  // Plan every pool before changing any, so a failing draft leaves the target as it was.
  ASSIGN_OR_RETURN(const KvPool::ResizePlan target_plan,
                   m.target().PlanResize(id, capacity, history));
  if (m.paired()) {
    ASSIGN_OR_RETURN(const KvPool::ResizePlan draft_plan,
                     m.draft()->PlanResize(id, capacity, history));
    m.target().ApplyResize(target_plan);
    m.draft()->ApplyResize(draft_plan);
  } else {
    m.target().ApplyResize(target_plan);
  }
  return absl::OkStatus();
}

bool KvManager::CanGrow(RequestId id, int64_t tokens) const {
  for (const auto& pool : impl_->pools) {
    if (pool != nullptr && !pool->CanGrow(id, tokens)) return false;
  }
  return true;
}

absl::StatusOr<UpdateResult> KvManager::ApplyUpdate(const CacheUpdate& update) {
  LOCKSTEP_DCHECK(impl_->thread_checker.IsOnOwnerThread());
  const KvPool* pool = impl_->pool(update.pool);
  const KvCache* cache = pool == nullptr ? nullptr : pool->Find(update.id);
  if (cache == nullptr || cache->generation() != update.generation || !cache->active()) {
    ++impl_->stale_updates;
    return UpdateResult::kStale;
  }
  RETURN_IF_ERROR(Resize(update.id, update.pool, update.capacity, update.history));
  return UpdateResult::kApplied;
}

absl::Status KvManager::Suspend(RequestId id) {
  LOCKSTEP_DCHECK(impl_->thread_checker.IsOnOwnerThread());
  if (impl_->target().Find(id) == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", id.value(), " has no target cache"));
  }
  for (const auto& pool : impl_->pools) {
    if (KvCache* cache = pool == nullptr ? nullptr : pool->Find(id)) {
      cache->set_status(CacheStatus::kSuspended);
    }
  }
  return absl::OkStatus();
}

absl::Status KvManager::Resume(RequestId id) {
  LOCKSTEP_DCHECK(impl_->thread_checker.IsOnOwnerThread());
  if (impl_->target().Find(id) == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", id.value(), " has no target cache"));
  }
  for (const auto& pool : impl_->pools) {
    if (KvCache* cache = pool == nullptr ? nullptr : pool->Find(id)) {
      cache->set_status(CacheStatus::kActive);
    }
  }
  return absl::OkStatus();
}

int KvManager::Release(RequestId id) {
  LOCKSTEP_DCHECK(impl_->thread_checker.IsOnOwnerThread());
  int closed = 0;
  if (impl_->onboarder != nullptr) impl_->onboarder->Forget(id);
  if (impl_->pins != nullptr) impl_->pins->Release(id);
  for (const auto& pool : impl_->pools) {
    if (pool != nullptr && pool->Close(id)) ++closed;
  }
  return closed;
}

absl::Status KvManager::Commit(RequestId id, absl::Span<const int32_t> tokens) {
  return impl_->Commit(id, tokens, {});
}

absl::Status KvManager::Commit(RequestId id, absl::Span<const int32_t> tokens,
                               const PrefixKeys& keys) {
  RETURN_IF_ERROR(impl_->CheckKeysAtLeast(tokens, keys));
  return impl_->Commit(id, tokens, keys.keys());
}

absl::Status KvManager::Impl::Commit(RequestId id, absl::Span<const int32_t> tokens,
                                     absl::Span<const uint64_t> keys) {
  LOCKSTEP_DCHECK(thread_checker.IsOnOwnerThread());
  KvCache* cache = target().Find(id);
  if (cache == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", id.value(), " has no target cache"));
  }
  target().Commit(*cache, tokens, keys, 0);
  // A paired draft cache and an unpaired mirror publish the same tokens, up to their
  // own history.
  if (draft() != nullptr) {
    if (KvCache* d = draft()->Find(id)) {
      draft()->Commit(*d, tokens, draft_shares_keys() ? keys : absl::Span<const uint64_t>(), 0);
    }
  }
  return absl::OkStatus();
}

int64_t KvManager::ProbePrefix(absl::Span<const int32_t> prompt) const {
  return impl_->ReusableTokens(prompt, {});
}

absl::StatusOr<int64_t> KvManager::ProbePrefix(absl::Span<const int32_t> prompt,
                                               const PrefixKeys& keys) const {
  RETURN_IF_ERROR(impl_->CheckKeys(prompt, keys));
  return impl_->ReusableTokens(prompt, keys.keys());
}

void KvManager::HashPrefix(absl::Span<const int32_t> tokens, PrefixKeys* keys) const {
  keys->Extend(impl_->config.target.reuse_salt, impl_->target().tokens_per_block(), tokens);
}

void KvManager::SetEventObserver(KvEventObserver* observer) {
  impl_->target().set_event_observer(observer);
  if (impl_->onboarder != nullptr) impl_->onboarder->tiers().set_event_observer(observer);
}

bool KvManager::Has(RequestId id, PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p != nullptr && p->Find(id) != nullptr;
}

std::optional<CacheInfo> KvManager::Info(RequestId id, PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  const KvCache* cache = p == nullptr ? nullptr : p->Find(id);
  if (cache == nullptr) return std::nullopt;
  return cache->Info();
}

absl::Span<const BlockId> KvManager::BlockTable(RequestId id, PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  const KvCache* cache = p == nullptr ? nullptr : p->Find(id);
  if (cache == nullptr) return {};
  return cache->blocks();
}

BlockRefs KvManager::BlockRefsOf(RequestId id) const {
  BlockRefs refs;
  refs.id = id;
  if (const std::optional<CacheInfo> target = Info(id, PoolKind::kTarget)) {
    refs.generation = target->generation;
  }
  const absl::Span<const BlockId> target_blocks = BlockTable(id, PoolKind::kTarget);
  refs.blocks.assign(target_blocks.begin(), target_blocks.end());
  if (const std::optional<CacheInfo> draft = Info(id, PoolKind::kDraft)) {
    refs.draft_generation = draft->generation;
    const absl::Span<const BlockId> draft_blocks = BlockTable(id, PoolKind::kDraft);
    refs.draft_blocks.assign(draft_blocks.begin(), draft_blocks.end());
  }
  return refs;
}

std::vector<RequestId> KvManager::Ids(PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p == nullptr ? std::vector<RequestId>() : p->Ids();
}

uint64_t KvManager::next_generation() const { return impl_->next_generation; }

const BlockLayout& KvManager::layout(PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p == nullptr ? impl_->config.draft.layout : p->layout();
}

std::byte* KvManager::Storage(PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p == nullptr ? nullptr : p->storage();
}

BlockCopier* KvManager::Copier(PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p == nullptr ? nullptr : p->copier();
}

MemoryKind KvManager::memory_kind() const { return impl_->target().memory_kind(); }

int32_t KvManager::num_blocks(PoolKind pool) const {
  const KvPool* p = impl_->pool(pool);
  return p == nullptr ? 0 : p->num_blocks();
}

ManagerStats KvManager::Stats() const {
  ManagerStats stats;
  stats.target = impl_->target().Stats();
  stats.evicted_blocks = impl_->target().evicted_blocks();
  if (const KvPool* draft = impl_->draft()) {
    stats.draft = draft->Stats();
    stats.evicted_blocks += draft->evicted_blocks();
  }
  stats.stale_updates = impl_->stale_updates;
  stats.reused_tokens = impl_->reused_tokens;
  stats.mirror_reused_tokens = impl_->mirror_reused_tokens;
  if (impl_->onboarder != nullptr) {
    stats.tiers = impl_->onboarder->Stats();
    stats.onboarded_tokens = impl_->onboarder->onboarded_tokens();
  }
  return stats;
}

std::vector<std::string> KvManager::Audit(absl::Span<const RequestId> live_ids,
                                          absl::Span<const RequestId> claimed_ids,
                                          bool dummy_active) const {
  const Impl& m = *impl_;
  absl::flat_hash_set<RequestId> owners(live_ids.begin(), live_ids.end());
  owners.insert(claimed_ids.begin(), claimed_ids.end());
  if (dummy_active) owners.insert(kDummyId);

  std::vector<std::string> out;
  for (const auto& pool : m.pools) {
    if (pool != nullptr) pool->AuditInto(absl::StrCat(pool->name(), " pool: "), owners, &out);
  }
  if (const KvPool* draft = m.draft()) {
    // Draft keys are a subset of target keys in every draft mode; paired pools hold the
    // same keys with the same history, capacity and status.
    for (const RequestId id : draft->Ids()) {
      if (m.target().Find(id) == nullptr) {
        out.push_back(absl::StrCat("draft pool: request ", id.value(),
                                   " has a draft cache but no target cache"));
      }
    }
    if (m.paired()) {
      for (const RequestId id : m.target().Ids()) {
        const KvCache* t = m.target().Find(id);
        const KvCache* d = draft->Find(id);
        if (d == nullptr) {
          out.push_back(absl::StrCat("paired draft pool: request ", id.value(),
                                     " has a target cache but no draft cache"));
        } else if (t->history() != d->history() || t->capacity() != d->capacity() ||
                   t->status() != d->status()) {
          out.push_back(absl::StrCat("paired draft pool: request ", id.value(),
                                     " is out of step with its target (history ", d->history(),
                                     " vs ", t->history(), ", capacity ", d->capacity(), " vs ",
                                     t->capacity(), ")"));
        }
      }
    }
  }
  if (m.onboarder != nullptr) m.onboarder->AuditInto("kv tiers: ", &out);
  if (m.pins != nullptr) m.pins->AuditInto("kv tiers: ", owners, &out);
  return out;
}

void KvManager::OnBatchLaunched() {
  if (impl_->onboarder != nullptr) impl_->onboarder->OnBatchLaunched();
}

void KvManager::OnBatchCollected() {
  if (impl_->onboarder != nullptr) impl_->onboarder->OnBatchCollected();
}

bool KvManager::OnboardPending(RequestId id) const {
  return impl_->onboarder != nullptr && impl_->onboarder->Pending(id);
}

absl::Status KvManager::FlushTiers() {
  if (impl_->onboarder == nullptr) return absl::OkStatus();
  return impl_->onboarder->tiers().Flush();
}

absl::StatusOr<std::shared_ptr<const HostBlocks>> KvManager::PinHostBlocks(
    RequestId id, absl::Span<const int32_t> prompt) {
  return impl_->PinHostBlocks(id, prompt, {});
}

absl::StatusOr<std::shared_ptr<const HostBlocks>> KvManager::PinHostBlocks(
    RequestId id, absl::Span<const int32_t> prompt, const PrefixKeys& keys) {
  RETURN_IF_ERROR(impl_->CheckKeysAtLeast(prompt, keys));
  return impl_->PinHostBlocks(id, prompt, keys.keys());
}

absl::StatusOr<std::shared_ptr<const HostBlocks>> KvManager::Impl::PinHostBlocks(
    RequestId id, absl::Span<const int32_t> prompt, absl::Span<const uint64_t> keys) {
  LOCKSTEP_DCHECK(thread_checker.IsOnOwnerThread());
  const KvCache* cache = target().Find(id);
  if (cache == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", id.value(), " has no target cache"));
  }
  if (pins == nullptr || id == kDummyId) return nullptr;
  // Only blocks whose KV is computed, and an onboard still pending has not copied in.
  if (onboarder->Pending(id)) return nullptr;
  const int64_t tokens = std::min<int64_t>(cache->history(), static_cast<int64_t>(prompt.size()));
  const int64_t blocks = tokens / target().tokens_per_block();
  if (keys.empty()) return pins->Pin(id, prompt, blocks);
  return pins->Pin(id, prompt, keys, blocks);
}

}  // namespace lockstep::kv

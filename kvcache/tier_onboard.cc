#include "kvcache/tier_onboard.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "kvcache/block_hash.h"

namespace lockstep::kv {

absl::StatusOr<std::unique_ptr<TierOnboarder>> TierOnboarder::Create(
    const TierConfig& config, KvPool* target, uint64_t salt,
    std::shared_ptr<const void> target_owner) {
  absl::StatusOr<std::unique_ptr<KvTiers>> tiers =
      KvTiers::Create(config, target->copier(), config.job_deadline, std::move(target_owner));
  if (!tiers.ok()) return tiers.status();
  return std::unique_ptr<TierOnboarder>(new TierOnboarder(*std::move(tiers), target, salt));
}

TierOnboarder::TierOnboarder(std::unique_ptr<KvTiers> tiers, KvPool* target, uint64_t salt)
    : tiers_(std::move(tiers)), target_(target), root_key_(RootHash(salt)) {
  target_->set_tiers(tiers_.get());
}

TierOnboarder::~TierOnboarder() { target_->set_tiers(nullptr); }

int64_t TierOnboarder::GrowableBlocks(const KvCache& cache, int64_t max_blocks) const {
  const int64_t tpb = target_->tokens_per_block();
  if (target_->CanGrow(cache, max_blocks * tpb)) return max_blocks;
  // CanGrow is monotone in the tokens and holds for 0: the largest n that fits.
  int64_t lo = 0;
  int64_t hi = max_blocks - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (target_->CanGrow(cache, mid * tpb)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

int64_t TierOnboarder::Onboard(KvCache& cache, absl::Span<const int32_t> prompt,
                               absl::Span<const uint64_t> keys) {
  if (prompt.size() < 2 || tiers_->empty()) return 0;
  const int tpb = target_->tokens_per_block();
  const int64_t have = cache.num_blocks();
  // Whole blocks before the last token (the prefill computes its KV) past the reused
  // ones, no more than the pool can add without taking blocks a cache holds.
  const int64_t max_blocks = static_cast<int64_t>(prompt.size() - 1) / tpb - have;
  if (max_blocks <= 0) return 0;
  const int64_t room = GrowableBlocks(cache, max_blocks);
  if (room == 0) return 0;
  // The reused blocks are the tree's: the chain continues from the last one's key.
  const uint64_t parent = have == 0 ? root_key_ : target_->tree().key(cache.blocks()[have - 1]);
  // An onboard that must wait for the fence holds its bytes: entries may leave the host
  // tier before it copies. One that copies at once reads them where they are.
  const bool copy_now = collected_ >= launched_;
  fetched_.Clear();
  const absl::Span<const int32_t> rest = prompt.subspan(static_cast<size_t>(have) * tpb);
  // With every key the chain may reach known, none is hashed.
  const int64_t blocks =
      static_cast<int64_t>(keys.size()) >= have + room
          ? tiers_->FetchChain(keys.subspan(static_cast<size_t>(have)), parent, rest, room,
                               /*hold=*/!copy_now, &fetched_)
          : tiers_->FetchChain(&BlockHash, parent, rest, room, /*hold=*/!copy_now, &fetched_);
  if (blocks == 0) return 0;
  const int64_t tokens = (have + blocks) * tpb;
  // GrowableBlocks said it fits, and a new active cache may grow its history to its
  // capacity: the plan PlanResize would make, without checking it again.
  LOCKSTEP_DCHECK(target_->PlanResize(cache, tokens, tokens).ok());
  target_->ApplyResize({.cache = &cache, .lengths = {.capacity = tokens, .history = tokens}});
  onboarded_tokens_ += blocks * tpb;
  const absl::Span<const int32_t> through = prompt.first(static_cast<size_t>(tokens));
  if (copy_now) {
    Complete(cache, have, fetched_, through);
  } else {
    pending_.push_back(PendingOnboard{.id = cache.id(),
                                      .generation = cache.generation(),
                                      .fence = launched_,
                                      .first_block = have,
                                      .fetched = std::move(fetched_),
                                      .tokens = {through.begin(), through.end()}});
    fetched_ = FetchedBlocks();
  }
  return blocks * tpb;
}

void TierOnboarder::Complete(KvCache& cache, int64_t first_block, const FetchedBlocks& fetched,
                             absl::Span<const int32_t> tokens) {
  const absl::Span<const BlockId> blocks =
      cache.blocks().subspan(static_cast<size_t>(first_block), fetched.data.size());
  // A failed copy into device memory is a failed device: nothing can recover it.
  LOCKSTEP_CHECK_OK(tiers_->CopyToDevice(fetched.data, blocks, fetched.from));
  target_->Commit(cache, tokens, fetched.keys, first_block);
}

void TierOnboarder::OnBatchCollected() {
  ++collected_;
  LOCKSTEP_CHECK(collected_ <= launched_)
      << "collected " << collected_ << " batches, launched " << launched_;
  auto ready = [&](const PendingOnboard& p) { return p.fence <= collected_; };
  for (const PendingOnboard& p : pending_) {
    if (!ready(p)) continue;
    KvCache* cache = target_->Find(p.id);
    if (cache != nullptr && cache->generation() == p.generation) {
      Complete(*cache, p.first_block, p.fetched, p.tokens);
    }
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), ready), pending_.end());
}

bool TierOnboarder::Pending(RequestId id) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const PendingOnboard& p) { return p.id == id; });
}

void TierOnboarder::Forget(RequestId id) {
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const PendingOnboard& p) { return p.id == id; }),
                 pending_.end());
}

void TierOnboarder::AuditInto(const std::string& prefix, std::vector<std::string>* out) const {
  tiers_->AuditInto(prefix, out);
  for (const PendingOnboard& p : pending_) {
    const KvCache* cache = target_->Find(p.id);
    const int64_t end = p.first_block + static_cast<int64_t>(p.fetched.data.size());
    if (cache == nullptr || cache->generation() != p.generation) {
      out->push_back(absl::StrCat(prefix, "pending onboard of request ", p.id.value(),
                                  " generation ", p.generation, " has no such cache"));
    } else if (cache->num_blocks() < end || cache->tree_blocks() > p.first_block ||
               cache->history() < end * target_->tokens_per_block()) {
      out->push_back(absl::StrCat(prefix, "pending onboard of request ", p.id.value(),
                                  " covers blocks [", p.first_block, ", ", end,
                                  ") that its cache does not hold unpublished"));
    }
  }
}

}  // namespace lockstep::kv

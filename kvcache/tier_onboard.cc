#include "kvcache/tier_onboard.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "kvcache/block_hash.h"
#include "kvcache/prefix_hash.h"

namespace lockstep::kv {

absl::StatusOr<std::unique_ptr<TierOnboarder>> TierOnboarder::Create(const TierConfig& config,
                                                                     KvPool* target,
                                                                     uint64_t salt) {
  absl::StatusOr<std::unique_ptr<KvTiers>> tiers = KvTiers::Create(config, target->copier());
  if (!tiers.ok()) return tiers.status();
  return std::unique_ptr<TierOnboarder>(new TierOnboarder(*std::move(tiers), target, salt));
}

TierOnboarder::TierOnboarder(std::unique_ptr<KvTiers> tiers, KvPool* target, uint64_t salt)
    : tiers_(std::move(tiers)), target_(target), root_key_(RootHash(salt)), salt_(salt) {
  target_->set_tiers(tiers_.get());
}

TierOnboarder::~TierOnboarder() { target_->set_tiers(nullptr); }

int64_t TierOnboarder::Onboard(KvCache& cache, absl::Span<const int32_t> prompt) {
  if (prompt.size() < 2) return 0;
  const TierStats stats = tiers_->Stats();
  if (stats.host_blocks + stats.disk_blocks == 0) return 0;
  const int tpb = target_->tokens_per_block();
  const absl::Span<const int32_t> limit = prompt.first(prompt.size() - 1);
  const int64_t have = cache.num_blocks();
  const int64_t max_blocks = static_cast<int64_t>(limit.size()) / tpb;
  if (max_blocks <= have) return 0;
  const std::vector<uint64_t> chain = PrefixHashChain(salt_, tpb, limit.first(max_blocks * tpb));
  const uint64_t parent = have == 0 ? root_key_ : chain[have - 1];
  int64_t found = tiers_->Probe(parent, absl::MakeConstSpan(chain).subspan(have),
                                limit.subspan(static_cast<size_t>(have) * tpb));
  while (found > 0 && !target_->CanGrow(cache.id(), found * tpb)) --found;
  PendingOnboard onboard{
      .id = cache.id(), .generation = cache.generation(), .fence = launched_, .first_block = have};
  for (int64_t i = 0; i < found; ++i) {
    Tier from = Tier::kDevice;
    absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes =
        tiers_->Fetch(chain[have + i], &from);
    if (!bytes.ok()) break;  // a miss after all (a damaged disk block): stop here
    onboard.bytes.push_back(*std::move(bytes));
    onboard.from.push_back(from);
  }
  const int64_t blocks = static_cast<int64_t>(onboard.bytes.size());
  if (blocks == 0) return 0;
  const int64_t tokens = (have + blocks) * tpb;
  absl::StatusOr<KvPool::ResizePlan> plan = target_->PlanResize(cache.id(), tokens, tokens);
  LOCKSTEP_CHECK_OK(plan.status());  // CanGrow said it fits
  target_->ApplyResize(*plan);
  onboard.tokens.assign(prompt.begin(), prompt.begin() + tokens);
  onboarded_tokens_ += blocks * tpb;
  if (collected_ >= launched_) {
    Complete(cache, onboard);
  } else {
    pending_.push_back(std::move(onboard));
  }
  return blocks * tpb;
}

void TierOnboarder::Complete(KvCache& cache, const PendingOnboard& onboard) {
  std::vector<const std::vector<std::byte>*> bytes;
  bytes.reserve(onboard.bytes.size());
  for (const auto& b : onboard.bytes) bytes.push_back(b.get());
  const absl::Span<const BlockId> blocks =
      cache.blocks().subspan(static_cast<size_t>(onboard.first_block), bytes.size());
  // A failed copy into device memory is a failed device: nothing can recover it.
  LOCKSTEP_CHECK_OK(tiers_->CopyToDevice(bytes, blocks, onboard.from));
  target_->Commit(cache, onboard.tokens);
}

void TierOnboarder::OnBatchCollected() {
  ++collected_;
  LOCKSTEP_CHECK(collected_ <= launched_)
      << "collected " << collected_ << " batches, launched " << launched_;
  auto ready = [&](const PendingOnboard& p) { return p.fence <= collected_; };
  for (const PendingOnboard& p : pending_) {
    if (!ready(p)) continue;
    KvCache* cache = target_->Find(p.id);
    if (cache != nullptr && cache->generation() == p.generation) Complete(*cache, p);
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
    const int64_t end = p.first_block + static_cast<int64_t>(p.bytes.size());
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

// TierOnboarder: a rank's KV tiers (kv_tiers.h) wired to its target pool, and the
// onboarding of prefix blocks found below the device (docs/design.md §5.1).
//
// Onboard runs right after a new target cache reused what the device holds: it probes
// the tiers for the following blocks of the prompt's chain (stopping at the first miss,
// and at what the pool can allocate without taking blocks a cache holds), fetches their
// verified bytes, grows the cache by that many fresh blocks with history covering them
// (so admission sees the blocks used) and copies the bytes in. The copy must not race
// with a batch in flight that may still read a freshly allocated block (one released
// after that batch was launched), so it waits for the fence: when every batch launched
// so far has been collected (always, for a caller that never calls OnBatchLaunched), it
// runs at once; otherwise the onboard is *pending* and runs in OnBatchCollected once
// every batch launched before the allocation is collected. A pending request must not
// be scheduled (Pending says so); its bytes are already fetched and verified, so the
// deferred copy cannot miss. The copied blocks are then published to the tree like a
// commit. Releasing the cache drops a pending onboard (Forget): the blocks return with
// the cache and nothing was published, so a vetoed step leaves nothing half-owned.
//
// Thread safety: like KvManager, which owns it: the executor thread only.
#ifndef LOCKSTEP_KVCACHE_TIER_ONBOARD_H_
#define LOCKSTEP_KVCACHE_TIER_ONBOARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_pool.h"
#include "kvcache/kv_tiers.h"
#include "kvcache/tier_config.h"

namespace lockstep::kv {

class TierOnboarder {
 public:
  // `target` (not owned) must outlive this; `salt` is its reuse salt. `target_owner`
  // (may be null) keeps `target` alive for a copy-down still running after this is
  // destroyed (KvTiers::Create's `device_owner`).
  static absl::StatusOr<std::unique_ptr<TierOnboarder>> Create(
      const TierConfig& config, KvPool* target, uint64_t salt,
      std::shared_ptr<const void> target_owner = nullptr);
  ~TierOnboarder();  // detaches from the pool
  TierOnboarder(const TierOnboarder&) = delete;
  TierOnboarder& operator=(const TierOnboarder&) = delete;

  // `cache` was just created for `prompt` and holds only reused device blocks (history =
  // committed = capacity on a block boundary). `keys`: the prompt's prefix keys under
  // the target's salt when known (those of its leading blocks; the rest are hashed).
  // Returns the tokens onboarded (history grew by that much).
  int64_t Onboard(KvCache& cache, absl::Span<const int32_t> prompt,
                  absl::Span<const uint64_t> keys = {});

  void OnBatchLaunched() { ++launched_; }
  void OnBatchCollected();
  bool Pending(RequestId id) const;
  void Forget(RequestId id);

  TierStats Stats() const { return tiers_->Stats(); }
  int64_t onboarded_tokens() const { return onboarded_tokens_; }
  // The tiers' audit, plus: every pending onboard's cache is live with its generation and
  // holds its blocks.
  void AuditInto(const std::string& prefix, std::vector<std::string>* out) const;
  KvTiers& tiers() { return *tiers_; }

 private:
  struct PendingOnboard {
    RequestId id;
    uint64_t generation = 0;
    int64_t fence = 0;        // batches launched before the allocation
    int64_t first_block = 0;  // index in the block table of the first onboarded block
    FetchedBlocks fetched;
    std::vector<int32_t> tokens;  // the prompt through the last onboarded block
  };

  TierOnboarder(std::unique_ptr<KvTiers> tiers, KvPool* target, uint64_t salt);
  // The most blocks, up to `max_blocks`, by which `cache` can grow without taking
  // a block another cache holds.
  int64_t GrowableBlocks(const KvCache& cache, int64_t max_blocks) const;
  // Copies `fetched` into the cache's blocks from `first_block` on and publishes them
  // (`tokens`: the prompt through the last of them).
  void Complete(KvCache& cache, int64_t first_block, const FetchedBlocks& fetched,
                absl::Span<const int32_t> tokens);

  std::unique_ptr<KvTiers> tiers_;
  KvPool* const target_;
  const uint64_t root_key_;
  int64_t launched_ = 0;
  int64_t collected_ = 0;
  int64_t onboarded_tokens_ = 0;
  std::vector<PendingOnboard> pending_;  // in creation order
  // Onboard's scratch, kept to spare allocations on each onboard.
  FetchedBlocks fetched_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_ONBOARD_H_

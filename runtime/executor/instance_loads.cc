#include "runtime/executor/instance_loads.h"

#include <algorithm>

#include "runtime/executor/field_count.h"

namespace lockstep::exec {

namespace {

// Tokens of KV a new request could get on this rank without pausing anyone: free and
// evictable blocks of the tightest pool.
int64_t FreeKvTokens(const kv::KvManager& kv, const kv::ManagerStats& stats) {
  int64_t tokens = int64_t{stats.target.free_blocks + stats.target.cached_blocks} *
                   kv.tokens_per_block(kv::PoolKind::kTarget);
  if (stats.draft.has_value()) {
    tokens =
        std::min<int64_t>(tokens, int64_t{stats.draft->free_blocks + stats.draft->cached_blocks} *
                                      kv.tokens_per_block(kv::PoolKind::kDraft));
  }
  return tokens;
}

RankView::Tiers TierView(const kv::TierStats& t) {
  return {.block_bytes = t.block_bytes,
          .host_blocks = t.host_blocks,
          .host_capacity_blocks = t.host_capacity_blocks,
          .disk_blocks = t.disk_blocks,
          .disk_capacity_blocks = t.disk_capacity_blocks,
          .host_hit_blocks = t.onboarded_blocks[static_cast<int>(kv::Tier::kHost)],
          .disk_hit_blocks = t.onboarded_blocks[static_cast<int>(kv::Tier::kDisk)],
          .offloaded_blocks = t.offloaded_blocks,
          .offload_ns = t.offload_ns,
          .onboard_ns = t.onboard_ns,
          .disk_corrupt = t.disk_corrupt,
          .pinned_blocks = t.pinned_blocks,
          .served_blocks = t.served_blocks,
          .stuck_jobs = t.stuck_jobs};
}

static_assert(FieldCount<RankView::Tiers>() == InstanceLoads::kNumTierFields,
              "a field was added to RankView::Tiers: list it in kTierFields and fill it below");

constexpr int kTierOffset =
    InstanceLoads::kLoadFields + kNumPerRankCounters + InstanceLoads::kKFields;

}  // namespace

InstanceLoads::Row InstanceLoads::LocalRow(int64_t active, int64_t tokens, int64_t schedulable,
                                           const kv::KvManager& kv,
                                           const ExecutorCounters& counters) {
  const kv::ManagerStats kv_stats = kv.Stats();
  Row local = {active,
               tokens,
               schedulable,
               kv_stats.target.free_blocks,
               kv_stats.draft ? kv_stats.draft->free_blocks : 0,
               kv_stats.target.used_blocks,
               kv_stats.draft ? kv_stats.draft->used_blocks : 0,
               FreeKvTokens(kv, kv_stats)};
  for (int i = 0; i < kNumPerRankCounters; ++i) {
    local[kLoadFields + i] = counters.*kPerRankCounters[i];
  }
  for (int k = 0; k < kKFields; ++k) {
    local[kLoadFields + kNumPerRankCounters + k] =
        (counters.*kPerRankKCounts[k / kKSize])[static_cast<size_t>(k % kKSize)];
  }
  const RankView::Tiers tiers = TierView(kv_stats.tiers);
  for (int i = 0; i < kNumTierFields; ++i) local[kTierOffset + i] = tiers.*kTierFields[i];
  return local;
}

std::vector<sched::RankLoad> InstanceLoads::Absorb(absl::Span<const int64_t> all, int world_size,
                                                   const ExecutorCounters& counters,
                                                   int64_t* schedulable) {
  std::vector<sched::RankLoad> loads(world_size);
  free_target_blocks_.resize(world_size);
  free_draft_blocks_.resize(world_size);
  used_target_blocks_.resize(world_size);
  used_draft_blocks_.resize(world_size);
  instance_counters_ = counters;
  for (int i = 0; i < kNumPerRankCounters; ++i) instance_counters_.*kPerRankCounters[i] = 0;
  for (DraftKCounts ExecutorCounters::*counts : kPerRankKCounts) {
    (instance_counters_.*counts).fill(0);
  }
  rank_views_.resize(world_size);
  for (int r = 0; r < world_size; ++r) {
    const int64_t* f = &all[kFields * r];
    loads[r] = {f[0], f[1], f[7]};
    *schedulable += f[2];
    free_target_blocks_[r] = f[3];
    free_draft_blocks_[r] = f[4];
    used_target_blocks_[r] = f[5];
    used_draft_blocks_[r] = f[6];
    RankView& rank = rank_views_[r];
    rank = {f[0], f[1], f[7]};
    for (int i = 0; i < kNumPerRankCounters; ++i) {
      instance_counters_.*kPerRankCounters[i] += f[kLoadFields + i];
      if (kPerRankCounters[i] == &ExecutorCounters::context_tokens) {
        rank.context_tokens = f[kLoadFields + i];
      }
      if (kPerRankCounters[i] == &ExecutorCounters::reused_tokens) {
        rank.reused_tokens = f[kLoadFields + i];
      }
    }
    for (int k = 0; k < kKFields; ++k) {
      (instance_counters_.*kPerRankKCounts[k / kKSize])[static_cast<size_t>(k % kKSize)] +=
          f[kLoadFields + kNumPerRankCounters + k];
    }
    for (int i = 0; i < kNumTierFields; ++i) rank.tiers.*kTierFields[i] = f[kTierOffset + i];
  }
  return loads;
}

}  // namespace lockstep::exec

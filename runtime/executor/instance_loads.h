// InstanceLoads: what this rank knows of every rank of its instance, as of the step's
// load all-gather (docs/design.md §3 phase 1). It owns each rank's free and used blocks
// per pool, each rank's load and prefix reuse (RankView), and the instance's counters
// (per-rank counters summed over every rank, the others as on this rank); it also
// defines one rank's row of that all-gather. The executor publishes them in its
// snapshot.
//
// Owned by Executor; executor thread only (not thread-safe).
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_INSTANCE_LOADS_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_INSTANCE_LOADS_H_

#include <array>
#include <cstdint>
#include <iterator>
#include <vector>

#include "absl/types/span.h"
#include "kvcache/kv_manager.h"
#include "runtime/executor/step_stats.h"
#include "scheduler/rank_assignment.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

// One rank of the instance as every rank learns it from the step's load all-gather.
struct RankView {
  int64_t active_requests = 0;
  int64_t active_tokens = 0;   // tokens in flight: its requests' sequence lengths
  int64_t free_kv_tokens = 0;  // KV a new request could get (free + evictable, tightest pool)
  // Prefix reuse (cumulative, ExecutorCounters): tokens its new context caches had to
  // prefill, and of those reused.
  int64_t context_tokens = 0;
  int64_t reused_tokens = 0;
  // Its KV tiers (kv::TierStats; zeros without tiers), for the per-tier metrics.
  struct Tiers {
    int64_t block_bytes = 0;
    int64_t host_blocks = 0;  // current
    int64_t host_capacity_blocks = 0;
    int64_t disk_blocks = 0;
    int64_t disk_capacity_blocks = 0;
    int64_t host_hit_blocks = 0;  // cumulative: blocks brought back from the host tier
    int64_t disk_hit_blocks = 0;
    int64_t offloaded_blocks = 0;
    int64_t offload_ns = 0;  // summed copy time of the copy-downs
    int64_t onboard_ns = 0;  // summed copy time of the blocks brought back
    int64_t disk_corrupt = 0;
    int64_t pinned_blocks = 0;  // current: host entries pinned for transfer claims
    int64_t served_blocks = 0;  // cumulative: blocks transfers read from the host tier
    int64_t stuck_jobs = 0;     // tier jobs past their deadline (then the tiers are off)
  } tiers;
};

// RankView::Tiers' fields, in their order on the all-gather.
inline constexpr int64_t RankView::Tiers::*kTierFields[] = {
    &RankView::Tiers::block_bytes,          &RankView::Tiers::host_blocks,
    &RankView::Tiers::host_capacity_blocks, &RankView::Tiers::disk_blocks,
    &RankView::Tiers::disk_capacity_blocks, &RankView::Tiers::host_hit_blocks,
    &RankView::Tiers::disk_hit_blocks,      &RankView::Tiers::offloaded_blocks,
    &RankView::Tiers::offload_ns,           &RankView::Tiers::onboard_ns,
    &RankView::Tiers::disk_corrupt,         &RankView::Tiers::pinned_blocks,
    &RankView::Tiers::served_blocks,        &RankView::Tiers::stuck_jobs};

class InstanceLoads {
 public:
  // One rank's row of the all-gather: its load, its pools, its per-rank counters, its
  // per-rank counts by K and its KV tiers.
  static constexpr int kLoadFields = 8;
  static constexpr int kKSize = spec::kMaxDraftTokens + 1;
  static constexpr int kKFields = kKSize * static_cast<int>(std::size(kPerRankKCounts));
  static constexpr int kNumTierFields = static_cast<int>(std::size(kTierFields));
  static constexpr int kFields = kLoadFields + kNumPerRankCounters + kKFields + kNumTierFields;
  using Row = std::array<int64_t, kFields>;

  // This rank's row: `active` requests, `tokens` in flight (sequence lengths),
  // `schedulable` requests, the pools of `kv` and `counters`.
  static Row LocalRow(int64_t active, int64_t tokens, int64_t schedulable, const kv::KvManager& kv,
                      const ExecutorCounters& counters);

  // Takes the gathered rows of `world_size` ranks (rank order); `counters` are this
  // rank's. Returns every rank's load (for AssignRanks) and adds every rank's
  // schedulable requests to `*schedulable`.
  std::vector<sched::RankLoad> Absorb(absl::Span<const int64_t> all, int world_size,
                                      const ExecutorCounters& counters, int64_t* schedulable);

  // Index: rank. Empty before the first Absorb.
  const std::vector<int64_t>& free_target_blocks() const { return free_target_blocks_; }
  const std::vector<int64_t>& free_draft_blocks() const { return free_draft_blocks_; }
  const std::vector<int64_t>& used_target_blocks() const { return used_target_blocks_; }
  const std::vector<int64_t>& used_draft_blocks() const { return used_draft_blocks_; }
  const std::vector<RankView>& ranks() const { return rank_views_; }
  const ExecutorCounters& instance_counters() const { return instance_counters_; }

 private:
  std::vector<int64_t> free_target_blocks_;
  std::vector<int64_t> free_draft_blocks_;
  std::vector<int64_t> used_target_blocks_;
  std::vector<int64_t> used_draft_blocks_;
  std::vector<RankView> rank_views_;
  ExecutorCounters instance_counters_;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_INSTANCE_LOADS_H_

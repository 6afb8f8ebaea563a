// Sizes of the KV tiers below a rank's device pools (docs/design.md §5.1): a host tier
// (host memory, in bytes) and an optional disk tier (a directory, in bytes). Part of
// KvManagerConfig; from the deployment YAML's `kv_tiers` section.
#ifndef LOCKSTEP_KVCACHE_TIER_CONFIG_H_
#define LOCKSTEP_KVCACHE_TIER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep::kv {

// How long a wait for one tier worker job may take by default (tier_worker.h).
inline constexpr absl::Duration kTierJobDeadline = absl::Seconds(60);

enum class Tier { kDevice = 0, kHost = 1, kDisk = 2 };
inline constexpr int kNumTiers = 3;
const char* TierName(Tier tier);

struct TierConfig {
  // Bytes of host memory for evicted target blocks; 0: no tiers at all.
  int64_t host_bytes = 0;
  // A directory for blocks the host tier evicts (created if missing; each rank keeps
  // one file of disk_bytes in a fresh subdirectory, made empty at start and removed at
  // exit, so it is safe to delete between runs). Empty: no disk tier.
  std::string disk_path;
  int64_t disk_bytes = 0;
  // How long a wait for one tier worker job may take before the tiers count as stuck
  // (kv_tiers.h). Not in the YAML: tests shorten it.
  absl::Duration job_deadline = kTierJobDeadline;

  bool enabled() const { return host_bytes > 0; }
  bool has_disk() const { return enabled() && !disk_path.empty() && disk_bytes > 0; }
  // InvalidArgument for negative sizes, a disk tier without a host tier, or disk bytes
  // without a path (and the reverse).
  absl::Status Validate() const;
};

// Counters of a rank's tiers (KvTiers::Stats, in ManagerStats). Block counts are
// current; the rest are totals since start.
struct TierStats {
  int64_t block_bytes = 0;
  int64_t host_blocks = 0;  // entries (copy-downs in flight included)
  int64_t host_capacity_blocks = 0;
  int64_t disk_blocks = 0;
  int64_t disk_capacity_blocks = 0;
  int64_t offloaded_blocks = 0;  // copy-downs finished
  int64_t offload_ns = 0;        // their copy time
  // Copy-downs the owner's thread ran itself (the step waited): the block was reused,
  // fetched or evicted from the host tier before the worker reached it.
  int64_t inline_offloads = 0;
  int64_t disk_writes = 0;
  int64_t disk_write_errors = 0;
  int64_t disk_corrupt = 0;  // blocks that failed verification (misses)
  // Worker jobs that missed their deadline (kv_tiers.h: the first turns both tiers off).
  int64_t stuck_jobs = 0;
  // Blocks brought back, by the tier they came from (index: Tier), and the copy time.
  int64_t onboarded_blocks[kNumTiers] = {};
  int64_t onboard_ns = 0;
  // Host entries pinned for transfer claims now (pins, tier_pins.h), and the blocks
  // transfers read from the host tier instead of the device (total).
  int64_t pinned_blocks = 0;
  int64_t served_blocks = 0;
  int64_t onboard_bytes() const {
    return (onboarded_blocks[1] + onboarded_blocks[2]) * block_bytes;
  }
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_CONFIG_H_

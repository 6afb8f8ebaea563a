// The KV cache's per-tier series of the router's /metrics, mirrored from each
// instance's last Stats (proto/worker.proto RankStats.tiers, kv_tokens_per_block,
// kv_bytes_per_token): where each rank's prefix hits came from (device, host or disk
// tier), what its host and disk tiers hold, and how fast blocks were copied down to the
// host tier (offload) and brought back into the device pool (onboard).
//
// Names (all prefixed lockstep_instance_; labels {instance} or {instance,rank[,tier]}):
//   kv_bytes_per_token{instance}              KV bytes per token of the target pool
//                                             (every layer; MLA: the latent vector)
//   kv_tier_hit_tokens_total{..,tier}         prompt tokens reused, by the tier they were
//                                             found in: device | host | disk
//   kv_tier_hit_rate{..,tier}                 those over the rank's prompt tokens
//   kv_tier_blocks / _capacity_blocks{..,tier}  host | disk (only ranks with tiers)
//   kv_tier_bytes / _capacity_bytes{..,tier}
//   kv_tier_offloaded_blocks_total, _offload_bytes_total, _offload_seconds_total
//   kv_tier_onboarded_blocks_total{..,tier}, _onboard_bytes_total, _onboard_seconds_total
//   kv_tier_offload_bytes_per_second, kv_tier_onboard_bytes_per_second
//                                             mean copy throughput since the start
//   kv_tier_offload_block_seconds, kv_tier_onboard_block_seconds
//                                             mean copy time of one block since the start
//   kv_tier_disk_corrupt_blocks_total         disk blocks that failed verification
//   kv_tier_stuck_jobs_total                  tier jobs past their deadline (a stalled
//                                             disk or memory system): from the first, the
//                                             rank's tiers are off
//   kv_tier_pinned_blocks                     host entries pinned for transfer claims now
//   kv_tier_served_blocks_total               blocks transfers read from the host tier
//                                             instead of the device (kvcache/tier_pins.h)
// A rank without tiers has only the device tier's hit series. Throughput and latency
// over a window: rate(_bytes_total) / rate(_seconds_total), rate(_seconds_total) /
// rate(_blocks_total).
//
// Thread safety: the families are thread-safe; Clear and Set are called under the
// renderer's lock (router_metrics.h).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_KV_TIER_METRICS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_KV_TIER_METRICS_H_

#include <string>

#include "proto/worker.pb.h"
#include "runtime/router/core/metrics.h"

namespace lockstep::router {

class KvTierMetrics {
 public:
  // Adds the families to `registry` (which must outlive this).
  explicit KvTierMetrics(MetricsRegistry& registry);

  // Drops every series (before a render sets those of the live instances).
  void Clear();
  // The series of `instance` from its last `stats`.
  void Set(const std::string& instance, const v1::StatsResponse& stats);

 private:
  GaugeFamily& bytes_per_token_;
  GaugeFamily& hit_tokens_;
  GaugeFamily& hit_rate_;
  GaugeFamily& blocks_;
  GaugeFamily& capacity_blocks_;
  GaugeFamily& bytes_;
  GaugeFamily& capacity_bytes_;
  GaugeFamily& offloaded_blocks_;
  GaugeFamily& offload_bytes_;
  GaugeFamily& offload_seconds_;
  GaugeFamily& onboarded_blocks_;
  GaugeFamily& onboard_bytes_;
  GaugeFamily& onboard_seconds_;
  GaugeFamily& offload_throughput_;
  GaugeFamily& onboard_throughput_;
  GaugeFamily& offload_latency_;
  GaugeFamily& onboard_latency_;
  GaugeFamily& disk_corrupt_;
  GaugeFamily& stuck_jobs_;
  GaugeFamily& pinned_;
  GaugeFamily& served_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_KV_TIER_METRICS_H_

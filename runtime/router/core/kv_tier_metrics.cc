#include "runtime/router/core/kv_tier_metrics.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lockstep::router {
namespace {

constexpr char kPrefix[] = "lockstep_instance_kv_tier_";

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

}  // namespace

KvTierMetrics::KvTierMetrics(MetricsRegistry& registry)
    : bytes_per_token_(registry.AddGauge(
          "lockstep_instance_kv_bytes_per_token",
          "KV cache bytes per token of the target pool on each rank (every layer; under MLA "
          "the latent vector).",
          {"instance"})),
      hit_tokens_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "hit_tokens_total"),
          "Prompt tokens the rank reused from its KV cache, by the tier they were found in "
          "(device, host, disk).",
          {"instance", "rank", "tier"})),
      hit_rate_(registry.AddGauge(absl::StrCat(kPrefix, "hit_rate"),
                                  "Prompt tokens reused from a tier over the rank's prompt tokens "
                                  "(cumulative).",
                                  {"instance", "rank", "tier"})),
      blocks_(registry.AddGauge(absl::StrCat(kPrefix, "blocks"),
                                "KV blocks held in the rank's host or disk tier (last poll).",
                                {"instance", "rank", "tier"})),
      capacity_blocks_(registry.AddGauge(absl::StrCat(kPrefix, "capacity_blocks"),
                                         "KV blocks the rank's host or disk tier can hold.",
                                         {"instance", "rank", "tier"})),
      bytes_(registry.AddGauge(absl::StrCat(kPrefix, "bytes"),
                               "Bytes of KV held in the rank's host or disk tier (last poll).",
                               {"instance", "rank", "tier"})),
      capacity_bytes_(registry.AddGauge(absl::StrCat(kPrefix, "capacity_bytes"),
                                        "Bytes of KV the rank's host or disk tier can hold.",
                                        {"instance", "rank", "tier"})),
      offloaded_blocks_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "offloaded_blocks_total"),
          "Blocks copied down from the device pool to the host tier.", {"instance", "rank"})),
      offload_bytes_(registry.AddMirroredCounter(absl::StrCat(kPrefix, "offload_bytes_total"),
                                                 "Bytes copied down to the host tier.",
                                                 {"instance", "rank"})),
      offload_seconds_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "offload_seconds_total"),
          "Summed copy time of the blocks copied down to the host tier.", {"instance", "rank"})),
      onboarded_blocks_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "onboarded_blocks_total"),
          "Prefix blocks brought back into the device pool, by the tier they came from.",
          {"instance", "rank", "tier"})),
      onboard_bytes_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "onboard_bytes_total"),
          "Bytes brought back into the device pool from the tiers.", {"instance", "rank"})),
      onboard_seconds_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "onboard_seconds_total"),
          "Summed copy time of the blocks brought back from the tiers.", {"instance", "rank"})),
      offload_throughput_(registry.AddGauge(
          absl::StrCat(kPrefix, "offload_bytes_per_second"),
          "Mean copy-down throughput since the start: offload bytes over offload seconds.",
          {"instance", "rank"})),
      onboard_throughput_(registry.AddGauge(
          absl::StrCat(kPrefix, "onboard_bytes_per_second"),
          "Mean onboard throughput since the start: onboard bytes over onboard seconds.",
          {"instance", "rank"})),
      offload_latency_(registry.AddGauge(
          absl::StrCat(kPrefix, "offload_block_seconds"),
          "Mean copy time of one block copied down to the host tier since the start.",
          {"instance", "rank"})),
      onboard_latency_(
          registry.AddGauge(absl::StrCat(kPrefix, "onboard_block_seconds"),
                            "Mean copy time of one block brought back from a tier since the start.",
                            {"instance", "rank"})),
      disk_corrupt_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "disk_corrupt_blocks_total"),
          "Disk tier blocks that failed verification (treated as misses, never served).",
          {"instance", "rank"})),
      stuck_jobs_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "stuck_jobs_total"),
          "KV tier jobs (copy-down, disk write or read) that missed their deadline; from the "
          "first, the rank's host and disk tiers are off and their blocks recomputed.",
          {"instance", "rank"})),
      pinned_(registry.AddGauge(absl::StrCat(kPrefix, "pinned_blocks"),
                                "Host tier blocks pinned for KV transfers now: a context rank "
                                "serving a prefix from its host tier (last poll).",
                                {"instance", "rank"})),
      served_(registry.AddMirroredCounter(
          absl::StrCat(kPrefix, "served_blocks_total"),
          "Blocks KV transfers read from the rank's host tier instead of its device pool.",
          {"instance", "rank"})) {}

void KvTierMetrics::Clear() {
  for (GaugeFamily* family : {&bytes_per_token_,
                              &hit_tokens_,
                              &hit_rate_,
                              &blocks_,
                              &capacity_blocks_,
                              &bytes_,
                              &capacity_bytes_,
                              &offloaded_blocks_,
                              &offload_bytes_,
                              &offload_seconds_,
                              &onboarded_blocks_,
                              &onboard_bytes_,
                              &onboard_seconds_,
                              &offload_throughput_,
                              &onboard_throughput_,
                              &offload_latency_,
                              &onboard_latency_,
                              &disk_corrupt_,
                              &stuck_jobs_,
                              &pinned_,
                              &served_}) {
    family->Clear();
  }
}

void KvTierMetrics::Set(const std::string& instance, const v1::StatsResponse& stats) {
  // A worker that does not report its KV shape (an older build): nothing to split by.
  const int64_t tokens_per_block = stats.kv_tokens_per_block();
  if (tokens_per_block <= 0) return;
  bytes_per_token_.Set({instance}, static_cast<double>(stats.kv_bytes_per_token()));
  for (const v1::RankStats& rank : stats.ranks()) {
    const std::string r = absl::StrCat(rank.rank());
    const v1::KvTierStats& t = rank.tiers();
    const double prompt = static_cast<double>(rank.prompt_tokens());
    const double host_hits = static_cast<double>(t.host_hit_blocks() * tokens_per_block);
    const double disk_hits = static_cast<double>(t.disk_hit_blocks() * tokens_per_block);
    // The rank's reuse counts the onboarded tokens too; the rest came from the device.
    const double device_hits =
        std::max(0.0, static_cast<double>(rank.prefix_tokens_reused()) - host_hits - disk_hits);
    const bool host = t.host_capacity_blocks() > 0;
    const bool disk = t.disk_capacity_blocks() > 0;
    const auto hits = [&](const char* tier, double tokens) {
      hit_tokens_.Set({instance, r, tier}, tokens);
      hit_rate_.Set({instance, r, tier}, Ratio(tokens, prompt));
    };
    hits("device", device_hits);
    if (!host && !disk) continue;
    const double block_bytes = static_cast<double>(t.block_bytes());
    const auto held = [&](const char* tier, int64_t blocks, int64_t capacity, int64_t onboarded) {
      blocks_.Set({instance, r, tier}, static_cast<double>(blocks));
      capacity_blocks_.Set({instance, r, tier}, static_cast<double>(capacity));
      bytes_.Set({instance, r, tier}, static_cast<double>(blocks) * block_bytes);
      capacity_bytes_.Set({instance, r, tier}, static_cast<double>(capacity) * block_bytes);
      onboarded_blocks_.Set({instance, r, tier}, static_cast<double>(onboarded));
    };
    if (host) {
      hits("host", host_hits);
      held("host", t.host_blocks(), t.host_capacity_blocks(), t.host_hit_blocks());
    }
    if (disk) {
      hits("disk", disk_hits);
      held("disk", t.disk_blocks(), t.disk_capacity_blocks(), t.disk_hit_blocks());
    }
    const double offloaded = static_cast<double>(t.offloaded_blocks());
    const double onboarded = static_cast<double>(t.host_hit_blocks() + t.disk_hit_blocks());
    const double offload_s = static_cast<double>(t.offload_micros()) / 1e6;
    const double onboard_s = static_cast<double>(t.onboard_micros()) / 1e6;
    offloaded_blocks_.Set({instance, r}, offloaded);
    offload_bytes_.Set({instance, r}, offloaded * block_bytes);
    offload_seconds_.Set({instance, r}, offload_s);
    onboard_bytes_.Set({instance, r}, onboarded * block_bytes);
    onboard_seconds_.Set({instance, r}, onboard_s);
    offload_throughput_.Set({instance, r}, Ratio(offloaded * block_bytes, offload_s));
    onboard_throughput_.Set({instance, r}, Ratio(onboarded * block_bytes, onboard_s));
    offload_latency_.Set({instance, r}, Ratio(offload_s, offloaded));
    onboard_latency_.Set({instance, r}, Ratio(onboard_s, onboarded));
    disk_corrupt_.Set({instance, r}, static_cast<double>(t.disk_corrupt_blocks()));
    stuck_jobs_.Set({instance, r}, static_cast<double>(t.stuck_jobs()));
    pinned_.Set({instance, r}, static_cast<double>(t.pinned_blocks()));
    served_.Set({instance, r}, static_cast<double>(t.served_blocks()));
  }
}

}  // namespace lockstep::router

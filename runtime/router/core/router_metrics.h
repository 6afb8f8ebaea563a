// The router's Prometheus metrics (served at /metrics). Request-level series are
// updated as requests run; per-instance series are refreshed from the registry (which
// holds each instance's last polled Stats) when the text is rendered.
//
// Names (all prefixed lockstep_):
//   router_requests_total{outcome}            ok | invalid | unauthorized | unavailable |
//                                             refused | error | cancelled | timeout
//   router_refusals_total{reason}             requests refused at once for overload:
//                                             max_concurrent_requests (the router) |
//                                             max_queued_requests (every instance of
//                                             a role they need is full)
//   router_prompt_tokens_total, router_generated_tokens_total
//   router_time_to_first_token_seconds        histogram
//   router_inter_token_latency_seconds        histogram (per token)
//   router_request_duration_seconds           histogram
//   router_queue_length                       requests not yet given their first token
//   router_draft_tokens_proposed_total / _accepted_total{method}
//                                             drafts of finished requests (all their legs)
//   router_request_draft_acceptance{method}   histogram: accepted / proposed per request
//   router_migrations_total{reason}          requests moved to another instance after a
//                                             failure (stream_broken | instance_unhealthy |
//                                             worker_error | kv_pull_failed)
//   router_migrated_requests_completed_total  migrated requests that finished normally
//   router_migration_latency_seconds          histogram: failure to the next token
//   router_requests_running                   requests in flight
//   router_routing_decisions_total{reason}    instance choices: prefix | load | round_robin
//   router_rank_hints_total{outcome}          legs sent with a rank hint: honoured (served
//                                             on that rank) | overridden
//   router_prefix_cached_tokens_total         prompt tokens the KV index showed cached on
//                                             the rank that served the leg (with
//                                             router_prompt_tokens_total: the hit rate)
//   router_kv_index_keys                      block-hash keys in the prefix index
//   router_kv_index_source_keys{instance,rank} keys per rank; _in_sync: 0 while it awaits
//                                             a snapshot
//   router_kv_event_batches_total, router_kv_snapshots_total, router_kv_resyncs_total
//   router_unauthenticated_calls_total       internal gRPC calls this process's servers
//                                             refused for a missing or wrong cluster token
//                                             (docs/security.md §1)
//   instance_healthy{instance,role,state}     1 when taking new requests
//   instance_router_in_flight{instance}
//   instance_steps_total / _vetoed_steps_total / _padded_steps_total /
//   _deferred_updates_total / _stale_updates_total / _dummy_updates_dropped_total /
//   _rank_errors_total / _error_steps_total / _engine_failures_total{instance}
//   instance_draft_tokens_proposed_total / _accepted_total{instance,method}
//   instance_draft_k_steps_total{instance,k}  generation steps by K (drafts asked)
//   instance_draft_k_requests{instance,k}     generation requests by the K of their next
//                                             step (last poll; 0 to the instance's K)
//   instance_draft_position_proposed_total / _accepted_total{instance,position}
//                                             verified steps that proposed / accepted a
//                                             draft at position 1, 2, ...
//   instance_draft_position_acceptance{instance,position} their ratio
//   instance_draft_mean_accepted_length{instance} tokens a verifying step emits: 1 plus
//                                             its accepted drafts, on average
//   instance_active_requests / instance_queued_requests{instance}
//   instance_free_blocks{instance,rank,pool}
//   instance_rank_prompt_tokens_total / _rank_prefix_tokens_reused_total{instance,rank}
//                                             prefix reuse per rank (hit rate: their ratio)
//   instance_rank_active_tokens{instance,rank} tokens in flight per rank (last poll)
//   instance_active_token_imbalance{instance} busiest rank's tokens in flight over the
//                                             mean (1: balanced)
//   instance_kv_bytes_per_token, instance_kv_tier_*  KV bytes per token and each rank's
//                                             hits, contents and copies per KV tier
//                                             (kv_tier_metrics.h)
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_METRICS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_METRICS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.pb.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/kv_tier_metrics.h"
#include "runtime/router/core/metrics.h"
#include "runtime/router/routing/kv_aware_policy.h"
#include "runtime/router/routing/kv_routing.h"

namespace lockstep::router {

class RouterMetrics {
 public:
  RouterMetrics();

  // The outcome label of a finished (or refused) request's status.
  static std::string_view OutcomeOf(const absl::Status& status);

  void RequestFinished(const absl::Status& status) {
    requests_.Increment({std::string(OutcomeOf(status))});
  }
  void Unauthorized() { requests_.Increment({"unauthorized"}); }
  // A request refused for overload (routing/admission.h, routing/queue_limit.h), by reason.
  void Refused(std::string_view reason) { refusals_.Increment({std::string(reason)}); }
  double RefusalCount(std::string_view reason) const {
    return refusals_.Value({std::string(reason)});
  }
  void PromptTokens(int64_t n) { prompt_tokens_.Increment({}, static_cast<double>(n)); }
  void GeneratedTokens(int64_t n) { generated_tokens_.Increment({}, static_cast<double>(n)); }
  void TimeToFirstToken(absl::Duration d) { ttft_.Observe({}, absl::ToDoubleSeconds(d)); }
  void InterTokenLatency(absl::Duration d) { itl_.Observe({}, absl::ToDoubleSeconds(d)); }
  void RequestDuration(absl::Duration d) { duration_.Observe({}, absl::ToDoubleSeconds(d)); }
  void QueueDelta(int delta) { queue_.Add({}, delta); }
  void RunningDelta(int delta) { running_.Add({}, delta); }
  // A finished request's drafts (nothing when it proposed none).
  void RequestDrafts(const v1::DraftTokens& drafts);
  // Request migration (runtime/router/core/migration.h).
  void Migration(std::string_view reason) { migrations_.Increment({std::string(reason)}); }
  void MigratedRequestCompleted() { migrated_completed_.Increment({}); }
  void MigrationLatency(absl::Duration d) {
    migration_latency_.Observe({}, absl::ToDoubleSeconds(d));
  }
  double MigrationCount(std::string_view reason) const {
    return migrations_.Value({std::string(reason)});
  }

  double RequestCount(std::string_view outcome) const {
    return requests_.Value({std::string(outcome)});
  }

  // Routing (routing/kv_aware_policy.h): a leg's instance choice; whether the rank that served a
  // hinted leg was the hinted one; cached prompt tokens on the rank that served a leg.
  void RoutingDecision(RoutingReason reason) {
    routing_decisions_.Increment({std::string(RoutingReasonName(reason))});
  }
  void RankHint(bool honoured) { rank_hints_.Increment({honoured ? "honoured" : "overridden"}); }
  void PrefixCached(int64_t tokens) { prefix_cached_.Increment({}, static_cast<double>(tokens)); }
  double RoutingDecisions(std::string_view reason) const {
    return routing_decisions_.Value({std::string(reason)});
  }
  double RankHints(std::string_view outcome) const {
    return rank_hints_.Value({std::string(outcome)});
  }
  double PrefixCachedTokens() const { return prefix_cached_.Value({}); }
  // The prefix index whose figures Render shows (not owned; null: none).
  void set_kv_routing(const KvRouting* kv) { kv_ = kv; }

  // The Prometheus text, with per-instance series from `instances`.
  std::string Render(const std::vector<InstanceState>& instances) ABSL_LOCKS_EXCLUDED(render_mu_);

 private:
  // The acceptance-by-position series of one instance (none before it verified a draft).
  void SetDraftPositions(const InstanceState& instance);

  MetricsRegistry registry_;
  CounterFamily& requests_;
  CounterFamily& refusals_;
  CounterFamily& prompt_tokens_;
  CounterFamily& generated_tokens_;
  HistogramFamily& ttft_;
  HistogramFamily& itl_;
  HistogramFamily& duration_;
  GaugeFamily& queue_;
  GaugeFamily& running_;
  CounterFamily& drafts_proposed_;
  CounterFamily& drafts_accepted_;
  HistogramFamily& draft_acceptance_;
  CounterFamily& migrations_;
  CounterFamily& migrated_completed_;
  HistogramFamily& migration_latency_;
  CounterFamily& routing_decisions_;
  CounterFamily& rank_hints_;
  CounterFamily& prefix_cached_;
  GaugeFamily& kv_keys_;
  GaugeFamily& kv_source_keys_;
  GaugeFamily& kv_source_in_sync_;
  GaugeFamily& kv_batches_;
  GaugeFamily& kv_snapshots_;
  GaugeFamily& kv_resyncs_;
  GaugeFamily& unauthenticated_calls_;
  const KvRouting* kv_ = nullptr;
  GaugeFamily& healthy_;
  GaugeFamily& in_flight_;
  std::vector<GaugeFamily*> instance_counters_;  // mirrored cumulative counters
  GaugeFamily& active_;
  GaugeFamily& queued_;
  GaugeFamily& free_blocks_;
  GaugeFamily& instance_drafts_proposed_;
  GaugeFamily& instance_drafts_accepted_;
  GaugeFamily& instance_k_steps_;
  GaugeFamily& instance_k_requests_;
  GaugeFamily& position_proposed_;
  GaugeFamily& position_accepted_;
  GaugeFamily& position_acceptance_;
  GaugeFamily& mean_accepted_length_;
  GaugeFamily& rank_prompt_tokens_;
  GaugeFamily& rank_reused_tokens_;
  GaugeFamily& rank_active_tokens_;
  GaugeFamily& token_imbalance_;
  GaugeFamily& expert_load_;            // {instance, layer, rank}
  GaugeFamily& expert_load_imbalance_;  // {instance, layer}
  KvTierMetrics kv_tiers_{registry_};
  absl::Mutex render_mu_;  // one refresh + render at a time
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_ROUTER_METRICS_H_

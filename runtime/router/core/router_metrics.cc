#include "runtime/router/core/router_metrics.h"

#include <algorithm>

#include "fmt/format.h"
#include "runtime/security/token_check.h"

namespace lockstep::router {
namespace {

// The per-instance cumulative counters mirrored from StatsResponse, in this order.
struct MirroredCounter {
  const char* name;
  const char* help;
  int64_t (*get)(const v1::StatsResponse&);
};

const MirroredCounter kMirrored[] = {
    {"lockstep_instance_steps_total", "Executor steps of the instance.",
     [](const v1::StatsResponse& s) { return s.steps(); }},
    {"lockstep_instance_vetoed_steps_total", "Steps whose forward was vetoed by the vote.",
     [](const v1::StatsResponse& s) { return s.vetoed_steps(); }},
    {"lockstep_instance_padded_steps_total", "Steps in which a rank ran the pad dummy.",
     [](const v1::StatsResponse& s) { return s.padded_steps(); }},
    {"lockstep_instance_deferred_updates_total", "Batch updates deferred by a veto.",
     [](const v1::StatsResponse& s) { return s.deferred_updates(); }},
    {"lockstep_instance_stale_updates_total",
     "Deferred updates of requests skipped because their cache was closed or re-created.",
     [](const v1::StatsResponse& s) { return s.stale_updates(); }},
    {"lockstep_instance_dummy_updates_dropped_total",
     "Updates of the pad dummy dropped (routine: its caches end with its step).",
     [](const v1::StatsResponse& s) { return s.dummy_updates_dropped(); }},
    {"lockstep_instance_rank_errors_total",
     "Rank-local errors (failed requests, failed engine batches) published at the step vote.",
     [](const v1::StatsResponse& s) { return s.rank_errors(); }},
    {"lockstep_instance_error_steps_total", "Steps at whose vote some rank published an error.",
     [](const v1::StatsResponse& s) { return s.error_steps(); }},
    {"lockstep_instance_engine_failures_total", "Engine batches that failed, on any rank.",
     [](const v1::StatsResponse& s) { return s.engine_failures(); }},
    {"lockstep_instance_paused_requests_total",
     "Requests paused to make room for older ones (KV released: recomputed or brought back "
     "from a KV tier when they run again).",
     [](const v1::StatsResponse& s) { return s.paused_requests(); }},
};

// Per-request acceptance rates: tenths, the last bucket exactly 1 (every draft taken).
std::vector<double> AcceptanceBuckets() {
  return {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0};
}

}  // namespace

RouterMetrics::RouterMetrics()
    : requests_(registry_.AddCounter("lockstep_router_requests_total",
                                     "Client requests by outcome.", {"outcome"})),
      refusals_(registry_.AddCounter("lockstep_router_refusals_total",
                                     "Requests refused at once for overload, by the limit hit.",
                                     {"reason"})),
      prompt_tokens_(registry_.AddCounter("lockstep_router_prompt_tokens_total",
                                          "Prompt tokens of accepted requests.")),
      generated_tokens_(registry_.AddCounter("lockstep_router_generated_tokens_total",
                                             "Tokens generated and sent to clients.")),
      ttft_(registry_.AddHistogram("lockstep_router_time_to_first_token_seconds",
                                   "Time from request arrival to its first token.",
                                   LatencyBucketsSeconds())),
      itl_(registry_.AddHistogram("lockstep_router_inter_token_latency_seconds",
                                  "Time between consecutive tokens of a request.",
                                  LatencyBucketsSeconds())),
      duration_(registry_.AddHistogram("lockstep_router_request_duration_seconds",
                                       "Time from request arrival to its end.",
                                       LatencyBucketsSeconds())),
      queue_(registry_.AddGauge("lockstep_router_queue_length",
                                "Requests in flight that have not received their first token.")),
      running_(registry_.AddGauge("lockstep_router_requests_running", "Requests in flight.")),
      drafts_proposed_(registry_.AddCounter("lockstep_router_draft_tokens_proposed_total",
                                            "Draft tokens proposed for finished requests.",
                                            {"method"})),
      drafts_accepted_(registry_.AddCounter("lockstep_router_draft_tokens_accepted_total",
                                            "Draft tokens accepted for finished requests.",
                                            {"method"})),
      draft_acceptance_(registry_.AddHistogram(
          "lockstep_router_request_draft_acceptance",
          "Accepted over proposed drafts of each finished request that proposed any.",
          AcceptanceBuckets(), {"method"})),
      migrations_(registry_.AddCounter(
          "lockstep_router_migrations_total",
          "Requests resumed on another instance after their instance failed, by reason.",
          {"reason"})),
      migrated_completed_(registry_.AddCounter("lockstep_router_migrated_requests_completed_total",
                                               "Migrated requests that finished normally.")),
      migration_latency_(registry_.AddHistogram(
          "lockstep_router_migration_latency_seconds",
          "Time from an instance failure to the next token of the migrated request.",
          LatencyBucketsSeconds())),
      routing_decisions_(registry_.AddCounter(
          "lockstep_router_routing_decisions_total",
          "Instance choices by reason: prefix (kv_aware found the prompt cached there), load, "
          "round_robin.",
          {"reason"})),
      rank_hints_(registry_.AddCounter(
          "lockstep_router_rank_hints_total",
          "Legs sent with a rank hint, by whether the hinted rank served them.", {"outcome"})),
      prefix_cached_(registry_.AddCounter(
          "lockstep_router_prefix_cached_tokens_total",
          "Prompt tokens the KV index showed cached on the rank that served the leg.")),
      kv_keys_(registry_.AddGauge("lockstep_router_kv_index_keys",
                                  "Block-hash keys in the router's prefix index.")),
      kv_source_keys_(registry_.AddGauge("lockstep_router_kv_index_source_keys",
                                         "Keys the prefix index holds for a rank.",
                                         {"instance", "rank"})),
      kv_source_in_sync_(registry_.AddGauge(
          "lockstep_router_kv_index_source_in_sync",
          "1 when the index follows the rank's events; 0 while it awaits a snapshot.",
          {"instance", "rank"})),
      kv_batches_(registry_.AddMirroredCounter("lockstep_router_kv_event_batches_total",
                                               "KV event batches received from the ranks.")),
      kv_snapshots_(registry_.AddMirroredCounter("lockstep_router_kv_snapshots_total",
                                                 "KV snapshots received from the ranks.")),
      kv_resyncs_(registry_.AddMirroredCounter(
          "lockstep_router_kv_resyncs_total",
          "Gaps in a rank's KV events, each answered by asking for a snapshot.")),
      unauthenticated_calls_(registry_.AddMirroredCounter(
          "lockstep_router_unauthenticated_calls_total",
          "Internal gRPC calls refused for a missing or wrong cluster token.")),
      healthy_(registry_.AddGauge("lockstep_instance_healthy",
                                  "1 when the instance takes new requests.",
                                  {"instance", "role", "state"})),
      in_flight_(registry_.AddGauge("lockstep_instance_router_in_flight",
                                    "Requests this router has in flight on the instance.",
                                    {"instance"})),
      active_(registry_.AddGauge("lockstep_instance_active_requests",
                                 "Active requests on the instance (last poll).", {"instance"})),
      queued_(registry_.AddGauge("lockstep_instance_queued_requests",
                                 "Queued requests on the instance (last poll).", {"instance"})),
      free_blocks_(registry_.AddGauge("lockstep_instance_free_blocks",
                                      "Free KV blocks per rank and pool (last poll).",
                                      {"instance", "rank", "pool"})),
      instance_drafts_proposed_(registry_.AddMirroredCounter(
          "lockstep_instance_draft_tokens_proposed_total", "Draft tokens proposed, by method.",
          {"instance", "method"})),
      instance_drafts_accepted_(registry_.AddMirroredCounter(
          "lockstep_instance_draft_tokens_accepted_total", "Draft tokens accepted, by method.",
          {"instance", "method"})),
      instance_k_steps_(registry_.AddMirroredCounter(
          "lockstep_instance_draft_k_steps_total",
          "Generation steps of requests by K, the drafts asked of the step (dynamic K moves it).",
          {"instance", "k"})),
      instance_k_requests_(registry_.AddGauge(
          "lockstep_instance_draft_k_requests",
          "Generation requests by the K of their next step (last poll; dynamic K moves them).",
          {"instance", "k"})),
      position_proposed_(registry_.AddMirroredCounter(
          "lockstep_instance_draft_position_proposed_total",
          "Verified generation steps that proposed a draft at this position.",
          {"instance", "position"})),
      position_accepted_(registry_.AddMirroredCounter(
          "lockstep_instance_draft_position_accepted_total",
          "Verified generation steps that accepted their draft at this position.",
          {"instance", "position"})),
      position_acceptance_(registry_.AddGauge(
          "lockstep_instance_draft_position_acceptance",
          "Drafts accepted at this position over drafts proposed there.",
          {"instance", "position"})),
      mean_accepted_length_(registry_.AddGauge(
          "lockstep_instance_draft_mean_accepted_length",
          "Tokens a verifying generation step emits on average: 1 plus its accepted drafts.",
          {"instance"})),
      rank_prompt_tokens_(registry_.AddMirroredCounter(
          "lockstep_instance_rank_prompt_tokens_total",
          "Prompt tokens the rank's new context caches had to prefill.", {"instance", "rank"})),
      rank_reused_tokens_(registry_.AddMirroredCounter(
          "lockstep_instance_rank_prefix_tokens_reused_total",
          "Of those prompt tokens, the ones reused from the rank's prefix cache.",
          {"instance", "rank"})),
      rank_active_tokens_(registry_.AddGauge(
          "lockstep_instance_rank_active_tokens",
          "Tokens in flight (sequence lengths of its requests) per rank (last poll).",
          {"instance", "rank"})),
      token_imbalance_(registry_.AddGauge(
          "lockstep_instance_active_token_imbalance",
          "Tokens in flight on the busiest rank over the mean of the ranks (1: balanced).",
          {"instance"})),
      expert_load_(registry_.AddGauge(
          "lockstep_instance_expert_load",
          "Records the rank's routed experts computed in the MoE layer over the last "
          "expert-load window (eplb.load_window).",
          {"instance", "layer", "rank"})),
      expert_load_imbalance_(registry_.AddGauge(
          "lockstep_instance_expert_load_imbalance",
          "Max over mean of the ranks' expert load in the MoE layer, last window (1: balanced).",
          {"instance", "layer"})) {
  for (const MirroredCounter& counter : kMirrored) {
    instance_counters_.push_back(
        &registry_.AddMirroredCounter(counter.name, counter.help, {"instance"}));
  }
  queue_.Set({}, 0);
  running_.Set({}, 0);
  prefix_cached_.Increment({}, 0);
  kv_keys_.Set({}, 0);
}

void RouterMetrics::RequestDrafts(const v1::DraftTokens& drafts) {
  if (drafts.proposed() <= 0) return;
  const double proposed = static_cast<double>(drafts.proposed());
  const double accepted = static_cast<double>(drafts.accepted());
  drafts_proposed_.Increment({drafts.method()}, proposed);
  drafts_accepted_.Increment({drafts.method()}, accepted);
  draft_acceptance_.Observe({drafts.method()}, accepted / proposed);
}

void RouterMetrics::SetDraftPositions(const InstanceState& instance) {
  const v1::StatsResponse& stats = instance.stats;
  const int positions =
      std::min(stats.draft_position_proposed_size(), stats.draft_position_accepted_size());
  double accepted_sum = 0;
  for (int i = 0; i < positions; ++i) {
    const LabelValues labels = {instance.name, fmt::format("{}", i + 1)};
    const double proposed = static_cast<double>(stats.draft_position_proposed(i));
    const double accepted = static_cast<double>(stats.draft_position_accepted(i));
    position_proposed_.Set(labels, proposed);
    position_accepted_.Set(labels, accepted);
    if (proposed > 0) position_acceptance_.Set(labels, accepted / proposed);
    accepted_sum += accepted;
  }
  if (positions > 0 && stats.draft_position_proposed(0) > 0) {
    mean_accepted_length_.Set(
        {instance.name}, 1 + accepted_sum / static_cast<double>(stats.draft_position_proposed(0)));
  }
}

std::string_view RouterMetrics::OutcomeOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return "invalid";
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return "unauthorized";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kResourceExhausted:
      return "refused";
    default:
      return "error";
  }
}

std::string RouterMetrics::Render(const std::vector<InstanceState>& instances) {
  absl::MutexLock lock(&render_mu_);
  healthy_.Clear();
  in_flight_.Clear();
  active_.Clear();
  queued_.Clear();
  free_blocks_.Clear();
  for (GaugeFamily* family : instance_counters_) family->Clear();
  instance_drafts_proposed_.Clear();
  instance_drafts_accepted_.Clear();
  instance_k_steps_.Clear();
  instance_k_requests_.Clear();
  for (GaugeFamily* family : {&position_proposed_, &position_accepted_, &position_acceptance_,
                              &mean_accepted_length_}) {
    family->Clear();
  }
  for (GaugeFamily* family :
       {&rank_prompt_tokens_, &rank_reused_tokens_, &rank_active_tokens_, &token_imbalance_,
        &expert_load_, &expert_load_imbalance_}) {
    family->Clear();
  }
  kv_source_keys_.Clear();
  kv_source_in_sync_.Clear();
  kv_tiers_.Clear();
  unauthenticated_calls_.Set({}, static_cast<double>(security::RejectedCalls()));
  if (kv_ != nullptr) {
    const KvRoutingStats kv = kv_->Stats();
    kv_keys_.Set({}, static_cast<double>(kv.keys));
    kv_batches_.Set({}, static_cast<double>(kv.batches));
    kv_snapshots_.Set({}, static_cast<double>(kv.snapshots));
    kv_resyncs_.Set({}, static_cast<double>(kv.resyncs));
    for (const KvSourceStats& source : kv.sources) {
      const LabelValues labels = {source.instance, fmt::format("{}", source.rank)};
      kv_source_keys_.Set(labels, static_cast<double>(source.keys));
      kv_source_in_sync_.Set(labels, source.in_sync ? 1 : 0);
    }
  }
  for (const InstanceState& instance : instances) {
    healthy_.Set({instance.name, std::string(config::InstanceRoleName(instance.role)),
                  std::string(InstanceHealthName(instance.health))},
                 instance.health == InstanceHealth::kHealthy ? 1 : 0);
    in_flight_.Set({instance.name}, static_cast<double>(instance.in_flight));
    if (!instance.has_stats) continue;
    kv_tiers_.Set(instance.name, instance.stats);
    for (size_t i = 0; i < instance_counters_.size(); ++i) {
      instance_counters_[i]->Set({instance.name},
                                 static_cast<double>(kMirrored[i].get(instance.stats)));
    }
    active_.Set({instance.name}, static_cast<double>(instance.stats.active_requests()));
    queued_.Set({instance.name}, static_cast<double>(instance.stats.queued_requests()));
    for (const v1::PoolStats& pool : instance.stats.pools()) {
      free_blocks_.Set({instance.name, fmt::format("{}", pool.rank()), pool.pool()},
                       static_cast<double>(pool.free_blocks()));
    }
    for (const v1::DraftTokens& drafts : instance.stats.drafts_by_method()) {
      instance_drafts_proposed_.Set({instance.name, drafts.method()},
                                    static_cast<double>(drafts.proposed()));
      instance_drafts_accepted_.Set({instance.name, drafts.method()},
                                    static_cast<double>(drafts.accepted()));
    }
    for (int k = 0; k < instance.stats.draft_k_steps_size(); ++k) {
      instance_k_steps_.Set({instance.name, fmt::format("{}", k)},
                            static_cast<double>(instance.stats.draft_k_steps(k)));
    }
    for (int k = 0; k < instance.stats.draft_k_requests_size(); ++k) {
      instance_k_requests_.Set({instance.name, fmt::format("{}", k)},
                               static_cast<double>(instance.stats.draft_k_requests(k)));
    }
    SetDraftPositions(instance);
    for (const v1::RankStats& rank : instance.stats.ranks()) {
      const std::vector<std::string> labels = {instance.name, fmt::format("{}", rank.rank())};
      rank_prompt_tokens_.Set(labels, static_cast<double>(rank.prompt_tokens()));
      rank_reused_tokens_.Set(labels, static_cast<double>(rank.prefix_tokens_reused()));
      rank_active_tokens_.Set(labels, static_cast<double>(rank.active_tokens()));
    }
    if (instance.stats.ranks_size() > 0) {
      token_imbalance_.Set({instance.name}, instance.stats.active_token_imbalance());
    }
    // Layers without a record in the window (dense layers) have no series.
    for (int l = 0; l < instance.stats.expert_load().layers_size(); ++l) {
      const v1::ExpertLayerLoad& layer = instance.stats.expert_load().layers(l);
      int64_t records = 0;
      for (const int64_t n : layer.computed()) records += n;
      if (records == 0) continue;
      const std::string name = fmt::format("{}", l);
      for (int r = 0; r < layer.computed_size(); ++r) {
        expert_load_.Set({instance.name, name, fmt::format("{}", r)},
                         static_cast<double>(layer.computed(r)));
      }
      expert_load_imbalance_.Set({instance.name, name}, layer.rank_imbalance());
    }
  }
  return registry_.RenderText();
}

}  // namespace lockstep::router

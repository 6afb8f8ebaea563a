#include "runtime/worker/expert_load_stats.h"

#include "absl/strings/str_cat.h"

namespace lockstep::worker {

void SetExpertLoadStats(const engine::ExpertLoadSnapshot& snapshot, v1::StatsResponse* out) {
  if (snapshot.windows <= 0) return;
  v1::ExpertLoadStats* stats = out->mutable_expert_load();
  stats->set_windows(snapshot.windows);
  stats->set_forwards(snapshot.forwards);
  stats->set_num_experts(snapshot.num_experts);
  stats->set_num_ranks(snapshot.num_ranks);
  for (int l = 0; l < snapshot.num_layers; ++l) {
    v1::ExpertLayerLoad* layer = stats->add_layers();
    const size_t e0 = static_cast<size_t>(l) * snapshot.num_experts;
    for (int e = 0; e < snapshot.num_experts; ++e) layer->add_routed(snapshot.routed[e0 + e]);
    const size_t r0 = static_cast<size_t>(l) * snapshot.num_ranks;
    for (int r = 0; r < snapshot.num_ranks; ++r) layer->add_computed(snapshot.computed[r0 + r]);
    layer->set_rank_imbalance(snapshot.RankImbalance(l));
  }
}

absl::StatusOr<engine::ExpertLoadSnapshot> ExpertLoadFromStats(const v1::ExpertLoadStats& stats) {
  if (stats.windows() <= 0) {
    return absl::FailedPreconditionError(
        "no expert-load window yet (is eplb.load_window set, and has the instance run a window?)");
  }
  if (stats.num_experts() < 1 || stats.num_ranks() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("expert load with ", stats.num_experts(),
                                                   " experts on ", stats.num_ranks(), " ranks"));
  }
  engine::ExpertLoadSnapshot snapshot;
  snapshot.windows = stats.windows();
  snapshot.forwards = stats.forwards();
  snapshot.num_layers = stats.layers_size();
  snapshot.num_experts = stats.num_experts();
  snapshot.num_ranks = stats.num_ranks();
  for (int l = 0; l < stats.layers_size(); ++l) {
    const v1::ExpertLayerLoad& layer = stats.layers(l);
    if (layer.routed_size() != stats.num_experts() || layer.computed_size() != stats.num_ranks()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert load layer ", l, ": ", layer.routed_size(), " routed counts for ",
          stats.num_experts(), " experts, ", layer.computed_size(), " computed counts for ",
          stats.num_ranks(), " ranks"));
    }
    snapshot.routed.insert(snapshot.routed.end(), layer.routed().begin(), layer.routed().end());
    snapshot.computed.insert(snapshot.computed.end(), layer.computed().begin(),
                             layer.computed().end());
  }
  return snapshot;
}

}  // namespace lockstep::worker

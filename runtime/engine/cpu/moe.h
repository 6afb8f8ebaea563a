// The mixture-of-experts block of one layer with expert parallelism.
//
// Routing (moe_route.h): softmax over the router logits, the top-k experts (ties: lower
// id), weights renormalised over the k when the config says so; the DeepSeek-V3 family
// routes by RouteGrouped (sigmoid scores, e_score_correction_bias, groups). Its shared
// experts are not here: the transformer runs them on every rank for every row. Routed
// experts are sharded over the ranks of the engine's Communicator in contiguous ranges
// (ExpertsOfRank, model/weight_plan.h), or as an expert placement says (MoeWeights'
// held and replicas; runtime/eplb), which may hold an expert on several ranks: the j-th
// record of such an expert in a rank's batch goes to replica (j + rank) mod replicas.
// Each token row is dispatched to a holder of each chosen expert with AllToAll (counts)
// and AllToAllV (rows), computed there, sent back with AllToAllV, and combined on the
// origin rank as a sum over its experts in expert-id order. Every
// rank makes exactly these three calls per MoE layer, whatever its batch holds (even
// nothing), with tags "<model>.moe.l<layer>.counts|.dispatch|.combine". With one rank
// nothing is exchanged.
//
// A row's output depends only on the row: the expert GEMMs are batch-invariant and the
// combine order is fixed, so results are bitwise equal for any batch, any number of
// ranks and any placement (every replica computes the same bits).
//
// Thread-compatible: used by the engine thread only.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/expert_rebalance.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

// The expert-parallel group of one model (the engine's own Communicator).
struct ExpertGroup {
  comm::Communicator* comm = nullptr;  // null: one rank
  int rank = 0;
  int world_size = 1;
  absl::Duration timeout = absl::Seconds(60);
};

// Test hook (the routing rule of testing/forward_compare.h): receives each MoE layer's
// router logits, [rows, num_experts] row-major, before they are routed. Called on the
// thread that runs Forward.
using RouterTap = std::function<void(int layer, const float* logits, int rows, int experts)>;

class MoeBlock {
 public:
  // `model_name` prefixes the collective tags ("target", "draft").
  MoeBlock(const ModelConfig& config, const std::string& model_name, ExpertGroup group);

  // out[m, hidden] = MoE(x[m, hidden]) for the layer's weights. An error from the
  // Communicator is returned as is (the group is then broken).
  absl::Status Forward(int layer, const MoeWeights& weights, const float* x, int m, float* out,
                       Arena& arena, ThreadPool* pool) const;

  // Collectives per call of Forward (0 with one rank).
  int collectives_per_layer() const { return group_.world_size > 1 ? 3 : 0; }

  // Taps the router logits of the calls that follow (empty: none).
  void set_router_tap(RouterTap tap) { router_tap_ = std::move(tap); }

  // Counts the routing into `load` (not owned; null: none). Forward of the last MoE
  // layer ends the forward there (ExpertLoad::EndForward, whose all-reduce every rank
  // joins at the same forward).
  void set_expert_load(ExpertLoad* load) { load_ = load; }
  // Rebalances at the ends of `load`'s windows (expert_rebalance.h; not owned; null:
  // never). An adopted placement's weights replace the layers' weights from the next
  // forward on.
  void set_rebalancer(ExpertRebalancer* rebalancer) { rebalancer_ = rebalancer; }

 private:
  struct Tags {
    std::string counts, dispatch, combine;
  };

  const ModelConfig& config_;
  const ExpertGroup group_;
  const bool grouped_;  // the DeepSeek-V3 family's routing (RouteGrouped)
  std::vector<Tags> tags_;  // per layer
  std::vector<int> owner_;  // owner_[expert]: its rank
  RouterTap router_tap_;
  ExpertLoad* load_ = nullptr;
  ExpertRebalancer* rebalancer_ = nullptr;
  // Per layer, the weights of an adopted placement (null: the caller's). Replaced at the
  // end of a forward, on the engine thread.
  mutable LayerMoeWeights adopted_;
  int last_moe_layer_ = -1;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_H_

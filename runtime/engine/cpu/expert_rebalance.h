// Live expert rebalancing (docs/eplb.md): at the end of every `every_windows`-th
// expert-load window each rank plans a placement from the window's all-reduced loads
// (eplb::Plan, deterministic, so every rank plans the same one); when it differs from
// the current placement, each rank loads the MoE weights the new placement gives it on
// a background thread while decoding goes on. At the end of the next window every rank
// joins one all-reduce (min) of "loaded" (tag "<model>.eplb.adopt"): all loaded, every
// rank adopts the new placement for the forwards that follow; any failure (or a load
// not done within the collective timeout), every rank keeps the old one. Both points
// are the end of the same forward on every rank (expert_load.h), so no rank skips the
// collective. Outputs do not change: a replica computes the same bits as any other.
//
// Thread safety: AtWindowEnd on the engine thread; the loader runs on its own thread
// and touches only what it returns.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/eplb/placement.h"
#include "runtime/eplb/plan.h"

namespace lockstep::engine {

// New MoE weights per layer (null for a layer that is not MoE).
using LayerMoeWeights = std::vector<std::shared_ptr<const MoeWeights>>;

// Builds this rank's MoE weights for `next`; `current` holds the weights in use (the
// experts a rank keeps can be copied from it). Runs on the loader thread.
using ExpertLoader = std::function<absl::StatusOr<LayerMoeWeights>(
    const eplb::Placement& next, const LayerMoeWeights& current)>;

// Reads the experts from the checkpoint in `model_dir` (copies the ones already held).
ExpertLoader CheckpointExpertLoader(std::string model_dir, ModelConfig config, int rank);

struct RebalanceOptions {
  int every_windows = 1;   // plan at the end of every Nth window (>= 1)
  eplb::PlanOptions plan;  // num_ranks: the group's world size
};

class ExpertRebalancer {
 public:
  ExpertRebalancer(const ModelConfig& config, eplb::Placement current, LayerMoeWeights weights,
                   RebalanceOptions options, comm::Communicator* comm, int rank,
                   absl::Duration timeout, const std::string& model_name, ExpertLoader loader);
  ~ExpertRebalancer();  // waits for a load in flight

  // At the end of a window, with its snapshot (the same on every rank). Returns the
  // weights to use from the next forward on when a new placement is adopted, else an
  // empty vector; an error only from the Communicator.
  absl::StatusOr<LayerMoeWeights> AtWindowEnd(const ExpertLoadSnapshot& snapshot);

  const eplb::Placement& placement() const { return current_; }
  int adopted() const { return adopted_; }  // placements adopted so far
  int aborted() const { return aborted_; }  // loads that failed on some rank

 private:
  [[maybe_unused]] const ModelConfig& config_;  // kept for the next rebalancing rules
  eplb::Placement current_;
  LayerMoeWeights weights_;  // in use
  const RebalanceOptions options_;
  comm::Communicator* const comm_;
  const int rank_;
  const absl::Duration timeout_;
  const std::string tag_;
  const ExpertLoader loader_;
  bool pending_ = false;
  eplb::Placement next_;
  std::future<absl::StatusOr<LayerMoeWeights>> loading_;
  int adopted_ = 0;
  int aborted_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_

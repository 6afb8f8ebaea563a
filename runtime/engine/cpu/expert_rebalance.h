// Live expert rebalancing (docs/eplb.md): at the end of every `every_windows`-th
// expert-load window each rank plans a placement from the window's all-reduced loads
// (eplb::Plan, deterministic, so every rank plans the same one); when it differs from
// the current placement, each rank prepares the MoE weights of the new placement on a
// background thread while decoding goes on, and every rank adopts it at the end of the
// next window. Where the experts a rank gains come from:
//  * from peers (RebalanceOptions::copy_from_peers, expert_copy.h): every rank derives
//    the same copies (sender, receiver, expert) from the two placements; the background
//    thread encodes what this rank sends from its weights in use and copies the experts
//    it keeps; at the adoption point one AllToAllBytes (tag "<model>.eplb.copy")
//    carries the copies and each rank decodes the ones it received into its new
//    weights (the exchange and this decoding are the part on the engine thread, which
//    owns the group's communicator: the adoption step takes that much longer);
//  * from the checkpoint (ExpertLoader): the background thread reads them.
// Then every rank joins one all-reduce (min) of "loaded" (tag "<model>.eplb.adopt"):
// all loaded, every rank adopts the new placement for the forwards that follow; any
// failure (a load or an encoding that failed or was not done within half the
// collective timeout, a peer's bytes missing or cut short), every rank keeps the old
// one. Both points are the end of the same forward on every rank (expert_load.h), so
// no rank skips a collective. Outputs do not change: a replica computes the same bits
// as any other.
//
// Thread safety: AtWindowEnd and the accessors on the engine thread; the background
// thread touches only what it returns and the atomic prepare_ns_.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/expert_copy.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/eplb/placement.h"
#include "runtime/eplb/plan.h"

namespace lockstep::engine {

// Builds this rank's MoE weights for `next`; `current` holds the weights in use (the
// experts a rank keeps can be copied from it). Runs on the loader thread.
using ExpertLoader = std::function<absl::StatusOr<LayerMoeWeights>(const eplb::Placement& next,
                                                                   const LayerMoeWeights& current)>;

// Reads the experts from the checkpoint in `model_dir` (copies the ones already held).
ExpertLoader CheckpointExpertLoader(std::string model_dir, ModelConfig config, int rank);

// What a rank sends its peers for `copies` (EncodeExpertCopies; tests substitute a
// failing one). Runs on the background thread.
using ExpertSender = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::vector<ExpertCopy>& copies, int rank, int world_size,
    const LayerMoeWeights& weights)>;

struct RebalanceOptions {
  int every_windows = 1;   // plan at the end of every Nth window (>= 1)
  eplb::PlanOptions plan;  // num_ranks: the group's world size
  // The experts a rank gains: true, copied from the ranks holding them (the loader is
  // not used and may be null); false, from the loader.
  bool copy_from_peers = false;
  ExpertSender sender;  // with copy_from_peers; empty: EncodeExpertCopies
};

// The last rebalance's costs, for benchmarks and logs.
struct RebalanceCosts {
  absl::Duration prepare;        // background: reading or encoding the experts
  absl::Duration exchange;       // engine thread: the AllToAllBytes and building the weights
  int64_t experts_received = 0;  // from peers
  int64_t bytes_received = 0;    // from peers, headers included (expert_copy.h)
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
  // The last adoption attempt's costs (adopted or not).
  const RebalanceCosts& last_costs() const { return costs_; }
  // Bytes received from peers over every adopted placement.
  int64_t bytes_received() const { return bytes_received_; }

 private:
  // With copy_from_peers, what the background thread prepares.
  struct Prepared {
    std::vector<std::string> send;                  // per destination rank
    std::vector<std::shared_ptr<MoeWeights>> kept;  // KeptExperts
  };

  // Exchanges the copies (empty bytes when `prepared` failed) and fills them in.
  absl::StatusOr<absl::StatusOr<LayerMoeWeights>> Exchange(absl::StatusOr<Prepared> prepared);

  std::vector<bool> moe_layer_;
  eplb::Placement current_;
  LayerMoeWeights weights_;  // in use
  const RebalanceOptions options_;
  comm::Communicator* const comm_;
  const int rank_;
  const absl::Duration timeout_;
  const std::string tag_;
  const std::string copy_tag_;
  const ExpertLoader loader_;
  bool pending_ = false;
  eplb::Placement next_;
  std::vector<ExpertCopy> copies_;  // with copy_from_peers
  std::future<absl::StatusOr<LayerMoeWeights>> loading_;
  std::future<absl::StatusOr<Prepared>> sending_;
  std::atomic<int64_t> prepare_ns_ = 0;  // set by the background thread
  RebalanceCosts costs_;
  int64_t bytes_received_ = 0;
  int adopted_ = 0;
  int aborted_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_REBALANCE_H_

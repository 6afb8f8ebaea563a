// Where the routed experts of an MoE model live across the expert-parallel ranks: per
// layer, per rank, the logical experts whose weights the rank holds (its physical
// slots). An expert held by several ranks is replicated; the MoE block splits its tokens
// among the replicas (runtime/engine/cpu/moe.h). Plan (plan.h) computes one from
// measured loads; the default is the contiguous sharding (model/weight_plan.h
// ExpertsOfRank) with no replicas.
//
// Plain value types and pure functions; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_EPLB_PLACEMENT_H_
#define LOCKSTEP_RUNTIME_EPLB_PLACEMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::eplb {

// One layer: slots[rank] lists the logical experts rank holds, ascending, no duplicates.
struct LayerPlacement {
  std::vector<std::vector<int>> slots;

  bool operator==(const LayerPlacement& other) const { return slots == other.slots; }
};

struct Placement {
  int num_experts = 0;
  int num_ranks = 0;
  std::vector<LayerPlacement> layers;  // one per layer (an entry for dense layers too)

  bool operator==(const Placement& other) const {
    return num_experts == other.num_experts && num_ranks == other.num_ranks &&
           layers == other.layers;
  }
};

// The contiguous sharding with no replicas: rank r holds [r * E / R, (r + 1) * E / R).
Placement ContiguousPlacement(int num_experts, int num_ranks, int num_layers);

// OK when every layer has num_ranks ranks, each slot names an expert in [0, num_experts),
// a rank's slots are ascending without duplicates, and every expert has a slot; else
// InvalidArgument naming the layer, rank and expert.
absl::Status Validate(const Placement& placement);

// replicas[expert] = the ranks holding it, ascending.
std::vector<std::vector<int>> ReplicaRanks(const LayerPlacement& layer, int num_experts);

// Each rank's load when each expert's load is split evenly among its replicas.
std::vector<double> RankLoads(const LayerPlacement& layer, const std::vector<double>& loads);

// max / mean of RankLoads (1 when the total load is 0).
double Imbalance(const LayerPlacement& layer, const std::vector<double>& loads);

// The (rank, expert) slots of `next` that `prev` did not hold: the expert weights a
// change of placement has to load.
int SlotsToLoad(const LayerPlacement& prev, const LayerPlacement& next);

// Text form, one line per layer and rank: "<layer> <rank>: e0 e1 ...". Parse reads it
// back (blank lines and '#' comments skipped; a layer with no line, e.g. a dense one,
// takes the contiguous sharding; a layer named must name all its ranks) and validates it.
std::string Format(const Placement& placement);
absl::StatusOr<Placement> Parse(const std::string& text, int num_experts, int num_ranks,
                                int num_layers);

// The loads of an expert-load dump (runtime/engine/cpu/expert_load.h): its lines
// "routed <layer>: n0 n1 ..." as loads[layer][expert]; other lines are skipped. Layers
// are numbered 0.. without gaps; every layer has the same number of experts.
absl::StatusOr<std::vector<std::vector<double>>> ParseLoads(const std::string& text);

}  // namespace lockstep::eplb

#endif  // LOCKSTEP_RUNTIME_EPLB_PLACEMENT_H_

// Expert-parallel load balancing: from measured per-layer expert loads, a placement of
// the logical experts onto the ranks' physical slots (placement.h) that evens the load
// per rank. Pure and deterministic: the same inputs give the same placement on every
// rank, so each rank can plan on its own from all-reduced loads.
//
// Per layer, with S = ceil(E / R) + redundant_per_rank slots on each of the R ranks:
//   1. Hierarchy (num_nodes > 1): the expert groups (num_groups, e.g. the model's
//      n_group; 0: each expert is its own group) are packed onto the nodes, G / N groups
//      each, heaviest group first onto the lightest node; then steps 2-4 run per node on
//      its experts and its R / N ranks, so a token's experts stay within the node that
//      group-limited routing chose. When G or R is not a multiple of N the layer is
//      planned as one node.
//   2. Replicate: every expert gets one slot; each spare slot goes to the expert with the
//      highest load per replica (ties: lower id), at most one replica per rank.
//   3. Pack: replicas, heaviest share first (a replica carries load / replicas), go to
//      the lightest rank with a free slot that does not hold the expert yet.
//   4. Refine: while swapping (or moving) one replica between the most loaded rank and
//      another lowers that pair's maximum, do the best such swap.
//   5. Stability (with a previous placement of the same shape): when the previous
//      layer's maximum rank load under the new loads is within keep_tolerance of the
//      new plan's, the layer keeps its previous placement (nothing moves); otherwise
//      the new plan's nodes and ranks are relabelled to keep as many experts in place as
//      a greedy matching finds.
#ifndef LOCKSTEP_RUNTIME_EPLB_PLAN_H_
#define LOCKSTEP_RUNTIME_EPLB_PLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/eplb/placement.h"

namespace lockstep::eplb {

struct PlanOptions {
  int num_ranks = 1;
  int num_nodes = 1;  // nodes of num_ranks / num_nodes consecutive ranks
  int redundant_per_rank = 0;
  int num_groups = 0;  // expert groups; 0: one per expert
  double keep_tolerance = 0.05;
};

// loads[layer][expert] >= 0 (token counts or any proportional measure); every layer
// has the same number of experts. `previous` may be null.
absl::StatusOr<Placement> Plan(const std::vector<std::vector<double>>& loads,
                               const PlanOptions& options, const Placement* previous = nullptr);

// Slots per rank that Plan gives: ceil(num_experts / num_ranks) + redundant_per_rank.
int SlotsPerRank(int num_experts, const PlanOptions& options);

}  // namespace lockstep::eplb

#endif  // LOCKSTEP_RUNTIME_EPLB_PLAN_H_

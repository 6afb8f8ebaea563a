// The simulator's model of expert parallelism with load balancing (docs/eplb.md): each
// rank's engine (the FakeEngine) is wrapped in an engine that, at every forward it
// launches, routes the batch's rows to the experts of a skewed MoE (per layer one hot
// expert), sends each record to a replica of its expert under the current placement
// (the CPU engine's rule: the j-th record of a replicated expert to replica
// (j + rank) mod replicas) and makes the exchange's collective (every rank learns how
// many records each rank computes). Every `window` forwards the window's routed counts
// are all-reduced; every `rebalance_windows`-th window each rank plans a placement with
// eplb::Plan; at the next window's end every rank joins an all-reduce (min) of "my
// weights loaded" (a seeded share of loads fail) and all adopt the plan, or all keep
// the old placement.
//
// The forwards are the executor's: a vetoed step launches none, a padded step launches
// the dummy's, so the collectives stay matched only when every rank launches the same
// forwards. After the run, PlacementDisagreements checks that every rank adopted (or
// aborted) the same placements at the same step; a rank that launched a forward the
// others did not leaves its collective unmatched and its batch fails.
//
// Thread safety: each rank's engine runs on its rank's thread; Summary and Violations
// after the ranks' threads are joined.
#ifndef LOCKSTEP_RUNTIME_SIM_EXPERT_EXCHANGE_H_
#define LOCKSTEP_RUNTIME_SIM_EXPERT_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/eplb/placement.h"

namespace lockstep::sim {

struct RankStackOptions;

struct SimEplbConfig {
  bool enabled = false;
  int num_layers = 2;  // MoE layers
  int num_experts = 8;
  int top_k = 2;
  int window = 8;             // forwards per load window
  int rebalance_windows = 2;  // plan at the end of every Nth window
  int redundant_slots = 1;    // spare expert slots per rank
  // Of each row's first expert choice, the share that goes to the layer's hot expert.
  double hot_share = 0.6;
  // A rank's weight load for a rebalance fails with this probability (seeded per rank
  // and window); the rebalance is then aborted on every rank.
  double load_failure_rate = 0.0;
  int failing_rank = -1;  // this rank's loads always fail (-1: none)
  // Each of the exchange's collectives waits at most this long for the other ranks.
  absl::Duration collective_timeout = absl::Seconds(30);
};

struct SimEplbSummary {
  int64_t forwards = 0;  // forwards of rank 0 (every rank's are checked equal)
  int64_t windows = 0;
  int64_t adopted = 0;  // placements adopted by every rank
  int64_t aborted = 0;  // rebalances aborted on every rank
  // Worst MoE layer's max / mean records per rank: in the first window, and in the
  // windows after the first rebalance (adopted or aborted), summed (0: none).
  double first_window_imbalance = 0;
  double imbalance_after_rebalance = 0;
};

// A rebalance decided on one rank at the end of a window.
struct PlacementEvent {
  int64_t step = 0;     // the executor's step of the forward that ended the window
  int64_t forward = 0;  // forwards the rank had run, that one included
  bool adopted = false;
  std::string placement;  // eplb::Format of the placement in use after it
};

// Where rank r's events differ from rank 0's (number, step, forward, outcome or
// placement), one line each; empty when every rank agrees.
std::vector<std::string> PlacementDisagreements(
    const std::vector<std::vector<PlacementEvent>>& per_rank);

class ExpertExchange {
 public:
  // Null when `config` is not enabled; otherwise wraps every rank's engine in `options`
  // (RankStackOptions::wrap_engine), with its own in-process collective group.
  static std::shared_ptr<ExpertExchange> Attach(const SimEplbConfig& config, uint64_t seed,
                                                int ranks, RankStackOptions* options);

  SimEplbSummary Summary() const;
  // Disagreements between the ranks, and ranks whose forwards or windows differ.
  std::vector<std::string> Violations() const;

  // Rank `rank`'s forward of `step` with `rows` rows; an error from a collective (or
  // the planner) fails the batch.
  absl::Status Forward(int rank, int64_t step, int64_t rows);

 private:
  struct RankState {
    eplb::Placement current;
    eplb::Placement next;
    bool pending = false;
    bool load_ok = true;
    int64_t forwards = 0;
    int64_t windows = 0;
    std::vector<int64_t> routed;    // this window, this rank's rows, [layer * E + expert]
    std::vector<int64_t> computed;  // this window, every rank's, [layer * R + rank]
    std::vector<PlacementEvent> events;
    double first_window_imbalance = 0;
    std::vector<int64_t> after;  // computed, summed over the windows after the first event
  };

  ExpertExchange(const SimEplbConfig& config, uint64_t seed, int ranks);
  absl::Status EndWindow(int rank, int64_t step, RankState& s);

  const SimEplbConfig config_;
  const uint64_t seed_;
  const int ranks_;
  std::vector<std::unique_ptr<comm::Communicator>> group_;
  std::vector<std::unique_ptr<absl::Mutex>> mu_;  // per rank, guards states_[rank]
  std::vector<RankState> states_;
};

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_EXPERT_EXCHANGE_H_

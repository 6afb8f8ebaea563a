// Expert load of one rank's target model, measured for expert-parallel load balancing
// (runtime/eplb): per MoE layer and logical expert, the tokens this rank's rows routed
// to it; per layer, the records this rank's experts computed. The MoE block
// (moe.h) adds to it during each forward.
//
// Every `window` forwards the counts of the window are all-reduced (sum) over the
// expert-parallel group and published as the latest snapshot. The all-reduce happens
// at the end of the window's last forward, which is the same forward on every rank:
// a forward runs on every rank or on none (the executor's step vote decides), and
// every rank counts the same forwards, so no rank skips the collective. Its tag is
// "<model>.eplb.loads".
//
// Thread safety: Add*/EndForward on the engine thread; Latest from any thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_LOAD_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_LOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"

namespace lockstep::engine {

// One window's loads, summed over the ranks.
struct ExpertLoadSnapshot {
  int64_t windows = 0;   // windows completed so far (0: none yet)
  int64_t forwards = 0;  // forwards in each window
  int num_layers = 0;
  int num_experts = 0;
  int num_ranks = 0;
  std::vector<int64_t> routed;    // [layer * num_experts + expert]: tokens routed to it
  std::vector<int64_t> computed;  // [layer * num_ranks + rank]: records rank computed

  // max / mean of the ranks' computed records of `layer` (1 without any).
  double RankImbalance(int layer) const;
  // routed of `layer` as doubles (eplb::Plan's input).
  std::vector<double> LayerLoads(int layer) const;
  // Text for offline planning: "# windows W forwards F" then per layer one line
  // "routed <layer>: n0 n1 ..." and one "computed <layer>: r0 r1 ...".
  std::string Format() const;
};

// The latest published snapshot, for readers outside the engine thread (the worker's
// Stats: /metrics and the expert-load dump). Thread-safe.
class ExpertLoadBoard {
 public:
  void Publish(const ExpertLoadSnapshot& snapshot);
  // windows == 0: nothing published yet.
  ExpertLoadSnapshot Latest() const;

 private:
  mutable absl::Mutex mu_;
  ExpertLoadSnapshot latest_ ABSL_GUARDED_BY(mu_);
};

class ExpertLoad {
 public:
  // `window` forwards per window (> 0); `comm` null: one rank.
  ExpertLoad(int num_layers, int num_experts, int window, comm::Communicator* comm,
             absl::Duration timeout, const std::string& model_name);

  void AddRouted(int layer, const int* experts, int n);
  void AddComputed(int layer, int64_t records);
  // Ends one forward; at a window's end all-reduces and publishes. An error from the
  // Communicator is returned as is.
  absl::Status EndForward();

  ExpertLoadSnapshot Latest() const;
  // Whether the last EndForward ended a window.
  bool window_ended() const { return forwards_ % window_ == 0; }

  // Called on the engine thread with each window's snapshot once it is published (e.g.
  // to write it to a file); empty: none.
  void set_on_window(std::function<void(const ExpertLoadSnapshot&)> on_window) {
    on_window_ = std::move(on_window);
  }

 private:
  const int num_layers_, num_experts_, window_, rank_, world_;
  comm::Communicator* const comm_;
  const absl::Duration timeout_;
  const std::string tag_;
  int64_t forwards_ = 0;
  std::vector<int64_t> counts_;  // routed, then computed (this rank's column), as published
  std::function<void(const ExpertLoadSnapshot&)> on_window_;

  mutable absl::Mutex mu_;
  ExpertLoadSnapshot latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_LOAD_H_

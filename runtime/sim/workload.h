// Workloads for the simulator: an arrival process, prompt and output length
// distributions, and the request type mix, generated from a seed.
#ifndef LOCKSTEP_RUNTIME_SIM_WORKLOAD_H_
#define LOCKSTEP_RUNTIME_SIM_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/intake.h"

namespace lockstep::sim {

struct WorkloadConfig {
  int64_t num_requests = 100;
  // Mean arrivals per simulated second (Poisson); 0 sends everything at once.
  double arrival_rate = 2000;
  int64_t min_prompt = 8;
  int64_t max_prompt = 96;
  int32_t min_output = 4;
  int32_t max_output = 48;
  // Generation-only requests (disaggregated decode), with their context produced by
  // the fake context leg; or context-only requests (disaggregated prefill, whose leg
  // ends when the KV is handed off). Otherwise aggregated.
  bool generation_only = false;
  bool context_only = false;
  // Fraction of requests that pin a rank.
  double pinned_fraction = 0.0;
  // Fraction of requests cancelled by the client some steps after arrival.
  double cancel_fraction = 0.0;

  // Multi-turn conversations (0: independent requests, num_requests of them). Each of
  // `conversations` users (starting at the arrival rate) sends min_turns..max_turns
  // turns; every conversation starts with the same system prompt of `system_prompt`
  // tokens, and turn t's prompt is turn t-1's prompt + its output + a new user message
  // of min_prompt..max_prompt tokens, sent up to `max_think_steps` steps after turn
  // t-1 was answered (a follow-up). num_requests is then the sum of the turns.
  int32_t conversations = 0;
  int32_t min_turns = 2;
  int32_t max_turns = 5;
  int64_t system_prompt = 64;
  int32_t max_think_steps = 4;
  // Follow-ups carry a rank hint: the rank that answered the previous turn (where its
  // KV is), as the router's kv_aware policy would.
  bool hint_followups = false;
};

struct SimRequest {
  absl::Duration arrival;  // after the start (not for a follow-up)
  // A follow-up: the previous turn of its conversation (an index into the workload),
  // and the steps the client waits after that turn was answered; -1: none.
  int64_t follows = -1;
  int64_t think_steps = 0;
  exec::NewRequestSpec spec;
  // Cancel this many simulated steps after arrival (-1: never).
  int64_t cancel_after_steps = -1;
};

// `engine` supplies the token function, so generation-only requests carry the first
// token and drafts their context leg would have produced. `num_draft_tokens` is K.
std::vector<SimRequest> GenerateWorkload(const WorkloadConfig& config, uint64_t seed, int num_ranks,
                                         int num_draft_tokens, const engine::FakeEngine& engine);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_WORKLOAD_H_

// Request migration: a request resumed (on another instance) after the first tokens of
// its output were delivered. The continuation's prompt is the original prompt followed
// by those tokens; it asks for the tokens still to generate, with the same seed and
// sampling parameters, and num_generated_in_prompt grown by the delivered count, so
// the penalties and min_tokens see those tokens as output. Positions being absolute
// and every draw a function of (seed, position, the sequence's tokens), the
// continuation generates exactly what the original would have (docs/design.md §4).
// The router (runtime/router/core/request_runner.h) and the simulator (runtime/sim) both
// resume requests this way.
//
// Thread safety: a pure function.
#ifndef LOCKSTEP_SCHEDULER_CONTINUATION_H_
#define LOCKSTEP_SCHEDULER_CONTINUATION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/sampling_params.h"

namespace lockstep::sched {

struct Continuation {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
};

// `prompt` and `sampling` of the original request continued after `delivered`.
// Requires delivered.size() < sampling.max_tokens (something is left to generate).
Continuation ContinueAfter(absl::Span<const int32_t> prompt, const SamplingParams& sampling,
                           absl::Span<const int32_t> delivered);

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_CONTINUATION_H_

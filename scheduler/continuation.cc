#include "scheduler/continuation.h"

#include "common/check.h"

namespace lockstep::sched {

Continuation ContinueAfter(absl::Span<const int32_t> prompt, const SamplingParams& sampling,
                           absl::Span<const int32_t> delivered) {
  const int32_t n = static_cast<int32_t>(delivered.size());
  LOCKSTEP_CHECK(n < sampling.max_tokens)
      << "a continuation after " << n << " tokens has nothing left of its "
      << sampling.max_tokens;
  Continuation next{std::vector<int32_t>(prompt.begin(), prompt.end()), sampling};
  next.prompt.insert(next.prompt.end(), delivered.begin(), delivered.end());
  next.sampling.max_tokens -= n;
  next.sampling.num_generated_in_prompt += n;
  return next;
}

}  // namespace lockstep::sched

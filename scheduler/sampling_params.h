// Per-request sampling parameters, as the client set them (validated at the edge).
#ifndef LOCKSTEP_SCHEDULER_SAMPLING_PARAMS_H_
#define LOCKSTEP_SCHEDULER_SAMPLING_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::sched {

struct SamplingParams {
  // Most tokens to generate (>= 1).
  int32_t max_tokens = 16;
  // 0 means greedy (argmax); otherwise softmax temperature in (0, 2].
  float temperature = 0.0f;
  // Keep only the k most likely tokens; 0 disables.
  int32_t top_k = 0;
  // Keep the smallest set of tokens whose probability reaches top_p; 1 disables.
  float top_p = 1.0f;
  // The random stream of a request depends only on (seed, position), never on batch
  // composition, so the same request samples the same tokens anywhere.
  uint64_t seed = 0;
  // Generation stops after any of these tokens (the token is included in the output).
  std::vector<int32_t> stop_token_ids;
  // When false, the model's EOS token also stops generation.
  bool ignore_eos = false;
  // Return the top-n log-probabilities for each generated token; 0 for none.
  int32_t logprobs = 0;

  bool greedy() const { return temperature == 0.0f; }

  // Errors name the offending field.
  absl::Status Validate(int32_t vocab_size) const {
    if (max_tokens < 1) {
      return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 1, got ", max_tokens));
    }
    if (!(temperature >= 0.0f && temperature <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("temperature must be in [0, 2], got ", temperature));
    }
    if (top_k < 0)
      return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", top_k));
    if (!(top_p > 0.0f && top_p <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
    }
    if (logprobs < 0 || logprobs > 20) {
      return absl::InvalidArgumentError(
          absl::StrCat("logprobs must be in [0, 20], got ", logprobs));
    }
    for (int32_t t : stop_token_ids) {
      if (t < 0 || t >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stop_token_ids: token ", t, " is outside the vocabulary [0, ", vocab_size, ")"));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_SAMPLING_PARAMS_H_

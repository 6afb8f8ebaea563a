// Per-request sampling parameters, as the client set them (validated at the edge).
#ifndef LOCKSTEP_SCHEDULER_SAMPLING_PARAMS_H_
#define LOCKSTEP_SCHEDULER_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/grammar_spec.h"

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
  // Penalties on the logits (runtime/engine/cpu/sampler.h ProcessLogits), as in OpenAI and
  // vLLM: presence and frequency over the generated tokens, in [-2, 2]; repetition
  // (Hugging Face style, divides positive logits, multiplies negative ones) over the
  // prompt and generated tokens, in (0, 2], 1 disables.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  // EOS (unless ignore_eos) and the stop tokens cannot end generation before this many
  // tokens were generated.
  int32_t min_tokens = 0;
  // Added to the logits of these tokens (OpenAI logit_bias: ids in the vocabulary, bias
  // in [-100, 100]).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // A continuation of a request (the router migrates a request whose instance failed):
  // the last this-many prompt tokens were generated earlier, so the penalties and
  // min_tokens count them as output, and the continuation samples exactly as the
  // original would have (the draw for position p is the same, positions being
  // absolute). max_tokens then counts only the tokens still to generate.
  int32_t num_generated_in_prompt = 0;
  // Constrained decoding: the output must match this grammar (response_format, forced
  // tool calls). The rank that owns the request masks the logits with a Matcher rebuilt
  // from the generated tokens (runtime/engine/cpu/sampler_grammar.h); a dead end fails
  // the request naming it.
  std::optional<grammar::GrammarSpec> grammar;

  bool greedy() const { return temperature == 0.0f; }
  // The sampler needs the sequence's tokens (penalties, min_tokens, the grammar's
  // replay).
  bool UsesHistory() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
           min_tokens > 0 || grammar.has_value();
  }

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
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("presence_penalty must be in [-2, 2], got ", presence_penalty));
    }
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("frequency_penalty must be in [-2, 2], got ", frequency_penalty));
    }
    if (!(repetition_penalty > 0.0f && repetition_penalty <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("repetition_penalty must be in (0, 2], got ", repetition_penalty));
    }
    if (num_generated_in_prompt < 0) {
      return absl::InvalidArgumentError(absl::StrCat("num_generated_in_prompt must be >= 0, got ",
                                                     num_generated_in_prompt));
    }
    // A continuation's min_tokens counts the tokens generated before it.
    const int64_t most_tokens = int64_t{max_tokens} + num_generated_in_prompt;
    if (min_tokens < 0 || min_tokens > most_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "min_tokens must be in [0, max_tokens = ", most_tokens, "], got ", min_tokens));
    }
    for (const auto& [t, bias] : logit_bias) {
      if (t < 0 || t >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "logit_bias: token ", t, " is outside the vocabulary [0, ", vocab_size, ")"));
      }
      if (!(bias >= -100.0f && bias <= 100.0f)) {
        return absl::InvalidArgumentError(absl::StrCat("logit_bias: the bias of token ", t,
                                                       " must be in [-100, 100], got ", bias));
      }
    }
    if (grammar.has_value() &&
        (static_cast<int>(grammar->kind) < 0 ||
         static_cast<int>(grammar->kind) > static_cast<int>(grammar::GrammarSpec::Kind::kEbnf))) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: unknown kind ",
                                                     static_cast<int>(grammar->kind)));
    }
    if (grammar.has_value() && grammar->kind != grammar::GrammarSpec::Kind::kJsonObject &&
        grammar->text.empty()) {
      return absl::InvalidArgumentError("grammar: the schema, regex or EBNF text is empty");
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

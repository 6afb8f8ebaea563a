// Token sampling from logits: logit bias, min_tokens, presence / frequency /
// repetition penalties, then greedy, temperature, top-k, top-p, per-request seed.
//
// The random draw for the token at position p of a request is a counter-based hash of
// (seed, p, purpose): it depends on nothing else, so a request samples the same tokens
// whatever batch it is in, with or without speculation, on any rank. The penalties
// depend on the sequence's tokens, which are the same wherever it runs.
//
// Thread-compatible; scratch comes from the caller's Arena.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/model_engine.h"
#include "scheduler/sampling_params.h"

namespace lockstep::engine {

enum class DrawPurpose : uint64_t {
  kToken = 1,  // the token sampled at a position
};

// Uniform in [0, 1) from (seed, position, purpose) (splitmix64 rounds).
double CounterUniform(uint64_t seed, int64_t position, DrawPurpose purpose);

// The highest logit; ties go to the lowest token id.
int32_t ArgMax(const float* logits, int vocab);

// What the sampler knows of the sequence before the sampled position, for the
// penalties and min_tokens (params.UsesHistory()). The generated tokens are `output`
// followed by `pending` (e.g. the drafts accepted earlier in the same step).
// For a continuation (params.num_generated_in_prompt = g), the last g tokens of `prompt`
// were generated earlier and count as output before `output`.
struct SamplingHistory {
  absl::Span<const int32_t> prompt;
  absl::Span<const int32_t> output;
  absl::Span<const int32_t> pending;
  int32_t eos_token_id = -1;  // -1: none
  // Constrained decoding (sampler_grammar.h): bit t (32 tokens a word) is set when the
  // grammar allows token t next. Empty: every token is allowed.
  absl::Span<const uint32_t> allowed;
};

// The logits after the grammar's mask (history.allowed: the others to -inf), logit_bias, min_tokens (EOS unless ignore_eos, and the stop tokens,
// to -inf while fewer than min_tokens were generated) and the penalties (repetition
// over prompt and output, then frequency and presence over the output), in that
// order: `logits` itself when none applies, else a processed copy in `arena`.
const float* ProcessLogits(const float* logits, int vocab, const sched::SamplingParams& params,
                           const SamplingHistory& history, Arena& arena);

// Samples the token that will sit at `position` from `logits` under `params`
// (greedy when params.greedy()), after ProcessLogits with `history` (none: no
// history-dependent processing). A pure function of its arguments. -1 when no token is
// left (every token the grammar allows is at -inf: the grammar's dead end).
int32_t SampleToken(const float* logits, int vocab, const sched::SamplingParams& params,
                    int64_t position, Arena& arena, const SamplingHistory& history = {});

// log_softmax(logits)[chosen], then the `top_n` most likely tokens (ties: lower id).
std::vector<TokenLogprob> TokenLogprobs(const float* logits, int vocab, int32_t chosen, int top_n,
                                        Arena& arena);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_H_

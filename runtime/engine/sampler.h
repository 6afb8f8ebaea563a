// Token sampling from logits: greedy, temperature, top-k, top-p, per-request seed.
//
// The random draw for the token at position p of a request is a counter-based hash of
// (seed, p, purpose): it depends on nothing else, so a request samples the same tokens
// whatever batch it is in, with or without speculation, on any rank.
//
// Thread-compatible; scratch comes from the caller's Arena.
#ifndef LOCKSTEP_RUNTIME_ENGINE_SAMPLER_H_
#define LOCKSTEP_RUNTIME_ENGINE_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "runtime/engine/arena.h"
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

// Samples the token that will sit at `position` from `logits` under `params`
// (greedy when params.greedy()).
int32_t SampleToken(const float* logits, int vocab, const sched::SamplingParams& params,
                    int64_t position, Arena& arena);

// log_softmax(logits)[chosen], then the `top_n` most likely tokens (ties: lower id).
std::vector<TokenLogprob> TokenLogprobs(const float* logits, int vocab, int32_t chosen, int top_n,
                                        Arena& arena);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_SAMPLER_H_

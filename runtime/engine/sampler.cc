#include "runtime/engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "common/hash.h"

namespace lockstep::engine {
namespace {

// Orders token ids by logit, highest first; ties by lower id.
struct ByLogit {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

}  // namespace

double CounterUniform(uint64_t seed, int64_t position, DrawPurpose purpose) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ static_cast<uint64_t>(position));
  h = SplitMix64(h ^ static_cast<uint64_t>(purpose));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t ArgMax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t t = 1; t < vocab; ++t) {
    if (logits[t] > logits[best]) best = t;
  }
  return best;
}

int32_t SampleToken(const float* logits, int vocab, const sched::SamplingParams& params,
                    int64_t position, Arena& arena) {
  if (params.greedy()) return ArgMax(logits, vocab);
  // Candidates: every token in id order, or the top-k / top-p set in logit order.
  int32_t* ids = arena.Alloc<int32_t>(vocab);
  for (int32_t t = 0; t < vocab; ++t) ids[t] = t;
  int count = vocab;
  const bool truncate = (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f;
  if (truncate) {
    if (params.top_k > 0 && params.top_k < vocab) {
      std::partial_sort(ids, ids + params.top_k, ids + vocab, ByLogit{logits});
      count = params.top_k;
    } else {
      std::sort(ids, ids + vocab, ByLogit{logits});
    }
  }
  // Probabilities at the temperature, in double; the max logit is among the candidates.
  double* probs = arena.Alloc<double>(count);
  const float max_logit = logits[truncate ? ids[0] : ArgMax(logits, vocab)];
  const double inv_temperature = 1.0 / static_cast<double>(params.temperature);
  double total = 0.0;
  for (int i = 0; i < count; ++i) {
    probs[i] = std::exp((static_cast<double>(logits[ids[i]]) - max_logit) * inv_temperature);
    total += probs[i];
  }
  if (params.top_p < 1.0f) {
    double kept = 0.0;
    int keep = 0;
    while (keep < count) {
      kept += probs[keep++];
      if (kept >= static_cast<double>(params.top_p) * total) break;
    }
    count = keep;
    total = kept;
  }
  const double u = CounterUniform(params.seed, position, DrawPurpose::kToken) * total;
  double cumulative = 0.0;
  for (int i = 0; i < count; ++i) {
    cumulative += probs[i];
    if (u < cumulative) return ids[i];
  }
  return ids[count - 1];
}

std::vector<TokenLogprob> TokenLogprobs(const float* logits, int vocab, int32_t chosen, int top_n,
                                        Arena& arena) {
  const float max_logit = logits[ArgMax(logits, vocab)];
  double sum = 0.0;
  for (int t = 0; t < vocab; ++t) sum += std::exp(static_cast<double>(logits[t]) - max_logit);
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob = [&](int32_t t) { return static_cast<float>(logits[t] - log_z); };
  std::vector<TokenLogprob> result;
  result.reserve(top_n + 1);
  result.push_back({chosen, logprob(chosen)});
  top_n = std::min(top_n, vocab);
  if (top_n > 0) {
    int32_t* ids = arena.Alloc<int32_t>(vocab);
    for (int32_t t = 0; t < vocab; ++t) ids[t] = t;
    std::partial_sort(ids, ids + top_n, ids + vocab, ByLogit{logits});
    for (int i = 0; i < top_n; ++i) result.push_back({ids[i], logprob(ids[i])});
  }
  return result;
}

}  // namespace lockstep::engine

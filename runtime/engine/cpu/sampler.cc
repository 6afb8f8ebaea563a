#include "runtime/engine/cpu/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "common/splitmix64.h"

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
  // Shared with the device sampling kernels (runtime/cuda/kernels/sampling_kernels.h).
  return CounterUniform01(seed, position, static_cast<uint64_t>(purpose));
}

int32_t ArgMax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t t = 1; t < vocab; ++t) {
    if (logits[t] > logits[best]) best = t;
  }
  return best;
}

const float* ProcessLogits(const float* logits, int vocab, const sched::SamplingParams& params,
                           const SamplingHistory& history, Arena& arena) {
  // A continuation's last num_generated_in_prompt prompt tokens are earlier output.
  const size_t earlier = std::min(
      static_cast<size_t>(std::max(params.num_generated_in_prompt, 0)), history.prompt.size());
  const absl::Span<const int32_t> prompt =
      history.prompt.subspan(0, history.prompt.size() - earlier);
  const absl::Span<const int32_t> earlier_output = history.prompt.subspan(prompt.size());
  const int64_t generated =
      static_cast<int64_t>(earlier + history.output.size() + history.pending.size());
  const bool min_tokens = generated < params.min_tokens;
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool counts = params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
  const bool masked = !history.allowed.empty();
  if (params.logit_bias.empty() && !min_tokens && !repetition && !counts && !masked) return logits;
  float* out = arena.Alloc<float>(vocab);
  std::copy(logits, logits + vocab, out);
  if (masked) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (int32_t t = 0; t < vocab; ++t) {
      const size_t word = static_cast<size_t>(t) / 32;
      if (word >= history.allowed.size() || !((history.allowed[word] >> (t % 32)) & 1u)) {
        out[t] = kNegInf;
      }
    }
  }
  auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
  for (const auto& [t, bias] : params.logit_bias) {
    if (in_vocab(t)) out[t] += bias;
  }
  if (min_tokens) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (!params.ignore_eos && in_vocab(history.eos_token_id)) out[history.eos_token_id] = kNegInf;
    for (int32_t t : params.stop_token_ids) {
      if (in_vocab(t)) out[t] = kNegInf;
    }
  }
  if (!repetition && !counts) return out;
  // Occurrences in the output, and whether a token appeared at all (prompt or output).
  int32_t* count = arena.Alloc<int32_t>(vocab);
  uint8_t* seen = arena.Alloc<uint8_t>(vocab);
  std::fill(count, count + vocab, 0);
  std::fill(seen, seen + vocab, 0);
  for (int32_t t : prompt) {
    if (in_vocab(t)) seen[t] = 1;
  }
  for (absl::Span<const int32_t> part : {earlier_output, history.output, history.pending}) {
    for (int32_t t : part) {
      if (in_vocab(t)) ++count[t], seen[t] = 1;
    }
  }
  for (int32_t t = 0; t < vocab; ++t) {
    if (repetition && seen[t]) {
      out[t] = out[t] > 0 ? out[t] / params.repetition_penalty : out[t] * params.repetition_penalty;
    }
    if (count[t] > 0) {
      out[t] -= params.frequency_penalty * static_cast<float>(count[t]) + params.presence_penalty;
    }
  }
  return out;
}

namespace {

// SampleToken's draw over every token in id order, visiting only the tokens `allowed`
// sets: every other token's processed logit is -inf (ProcessLogits), so its
// probability is exactly 0.0 and adds nothing to the total or to a cumulative sum
// (x + 0.0 == x); the token drawn is the same, at the cost of the allowed tokens only
// (a constrained state allows a few hundred of a 128k vocabulary).
int32_t SampleAllowed(const float* logits, int vocab, const sched::SamplingParams& params,
                      int64_t position, absl::Span<const uint32_t> allowed, int32_t best) {
  const double max_logit = logits[best];
  const double inv_temperature = 1.0 / static_cast<double>(params.temperature);
  const size_t words = std::min(allowed.size(), (static_cast<size_t>(vocab) + 31) / 32);
  auto for_each_allowed = [&](auto&& visit) {
    for (size_t w = 0; w < words; ++w) {
      for (uint32_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = static_cast<int32_t>(w * 32 + std::countr_zero(bits));
        if (t >= vocab) return;
        if (!visit(t)) return;
      }
    }
  };
  // Each allowed token's probability, computed once in the first pass and read back in
  // the same order by the second (the same doubles as computing them again). Kept per
  // thread, not in the step's arena: its size varies with the mask, and every new
  // largest step would grow the arena.
  thread_local std::vector<double> scratch;
  size_t num_allowed = 0;
  for (size_t w = 0; w < words; ++w) num_allowed += std::popcount(allowed[w]);
  if (scratch.size() < num_allowed) scratch.resize(num_allowed);
  double* probs = scratch.data();
  int32_t count = 0;
  double total = 0.0;
  for_each_allowed([&](int32_t t) {
    probs[count] = std::exp((static_cast<double>(logits[t]) - max_logit) * inv_temperature);
    total += probs[count++];
    return true;
  });
  const double u = CounterUniform(params.seed, position, DrawPurpose::kToken) * total;
  double cumulative = 0.0;
  int32_t drawn = vocab - 1;  // as the full draw when rounding leaves u >= total
  int32_t i = 0;
  for_each_allowed([&](int32_t t) {
    cumulative += probs[i++];
    if (u < cumulative) {
      drawn = t;
      return false;
    }
    return true;
  });
  return drawn;
}

// Whether token t's bit is set in `allowed` (a word past its end: not allowed).
bool IsAllowed(absl::Span<const uint32_t> allowed, int32_t t) {
  const size_t word = static_cast<size_t>(t) / 32;
  return word < allowed.size() && ((allowed[word] >> (t % 32)) & 1u);
}

// Calls visit(t) for every token t < vocab that `allowed` sets, in id order.
template <typename Visit>
void ForEachAllowed(absl::Span<const uint32_t> allowed, int vocab, Visit&& visit) {
  const size_t words = std::min(allowed.size(), (static_cast<size_t>(vocab) + 31) / 32);
  for (size_t w = 0; w < words; ++w) {
    for (uint32_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
      const int32_t t = static_cast<int32_t>(w * 32 + std::countr_zero(bits));
      if (t >= vocab) return;
      visit(t);
    }
  }
}

// SampleToken under a grammar's mask without penalties or top-k/top-p, touching only
// the allowed tokens: their processed logits are ProcessLogits' values (the raw logit,
// then logit_bias, then min_tokens' -inf), written at their ids in a scratch array that
// is never read elsewhere (or the raw logits themselves when neither applies); every
// other token's processed logit would be -inf. ArgMax over the full processed logits
// starts at token 0 and takes a later token only when strictly greater, so a
// disallowed token (-inf) never replaces the best and token 0 is the start whether it
// is allowed or not: the same token as the full pass, -1 when the best is -inf.
int32_t SampleMasked(const float* logits, int vocab, const sched::SamplingParams& params,
                     int64_t position, Arena& arena, const SamplingHistory& history,
                     bool min_tokens) {
  const absl::Span<const uint32_t> allowed = history.allowed;
  const float* processed = logits;
  if (!params.logit_bias.empty() || min_tokens) {
    float* out = arena.Alloc<float>(vocab);
    ForEachAllowed(allowed, vocab, [&](int32_t t) { out[t] = logits[t]; });
    auto in_vocab_allowed = [&](int32_t t) { return t >= 0 && t < vocab && IsAllowed(allowed, t); };
    for (const auto& [t, bias] : params.logit_bias) {
      if (in_vocab_allowed(t)) out[t] += bias;
    }
    if (min_tokens) {
      constexpr float kNegInf = -std::numeric_limits<float>::infinity();
      if (!params.ignore_eos && in_vocab_allowed(history.eos_token_id)) {
        out[history.eos_token_id] = kNegInf;
      }
      for (int32_t t : params.stop_token_ids) {
        if (in_vocab_allowed(t)) out[t] = kNegInf;
      }
    }
    processed = out;
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int32_t best = 0;
  float best_logit = IsAllowed(allowed, 0) ? processed[0] : kNegInf;
  ForEachAllowed(allowed, vocab, [&](int32_t t) {
    if (t > 0 && processed[t] > best_logit) best = t, best_logit = processed[t];
  });
  if (best_logit == kNegInf) return -1;
  if (params.greedy()) return best;
  return SampleAllowed(processed, vocab, params, position, allowed, best);
}

}  // namespace

int32_t SampleToken(const float* logits, int vocab, const sched::SamplingParams& params,
                    int64_t position, Arena& arena, const SamplingHistory& history) {
  const bool truncate = (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f;
  if (!history.allowed.empty() && !truncate && params.repetition_penalty == 1.0f &&
      params.presence_penalty == 0.0f && params.frequency_penalty == 0.0f &&
      std::all_of(params.logit_bias.begin(), params.logit_bias.end(),
                  [](const auto& entry) { return std::isfinite(entry.second); })) {
    // As ProcessLogits decides min_tokens.
    const size_t earlier = std::min(
        static_cast<size_t>(std::max(params.num_generated_in_prompt, 0)), history.prompt.size());
    const int64_t generated =
        static_cast<int64_t>(earlier + history.output.size() + history.pending.size());
    return SampleMasked(logits, vocab, params, position, arena, history,
                        generated < params.min_tokens);
  }
  logits = ProcessLogits(logits, vocab, params, history, arena);
  if (!history.allowed.empty()) {
    const int32_t best = ArgMax(logits, vocab);
    if (logits[best] == -std::numeric_limits<float>::infinity()) return -1;
    if (params.greedy()) return best;
    if (!truncate) {
      return SampleAllowed(logits, vocab, params, position, history.allowed, best);
    }
  }
  if (params.greedy()) return ArgMax(logits, vocab);
  // Candidates: every token in id order, or the top-k / top-p set in logit order.
  int32_t* ids = arena.Alloc<int32_t>(vocab);
  for (int32_t t = 0; t < vocab; ++t) ids[t] = t;
  int count = vocab;
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

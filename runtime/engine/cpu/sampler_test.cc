#include "runtime/engine/cpu/sampler.h"

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

sched::SamplingParams Params(float temperature, int top_k = 0, float top_p = 1.0f,
                             uint64_t seed = 5) {
  sched::SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  params.seed = seed;
  return params;
}

TEST(SamplerTest, CounterUniformDependsOnEveryInputAndIsUniform) {
  const double u = CounterUniform(1, 10, DrawPurpose::kToken);
  EXPECT_EQ(u, CounterUniform(1, 10, DrawPurpose::kToken));
  EXPECT_NE(u, CounterUniform(2, 10, DrawPurpose::kToken));
  EXPECT_NE(u, CounterUniform(1, 11, DrawPurpose::kToken));
  double sum = 0;
  int below_tenth = 0;
  const int n = 20000;
  for (int p = 0; p < n; ++p) {
    const double x = CounterUniform(99, p, DrawPurpose::kToken);
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    sum += x;
    below_tenth += x < 0.1 ? 1 : 0;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(below_tenth / static_cast<double>(n), 0.1, 0.01);
}

TEST(SamplerTest, GreedyIsArgMaxWithTiesToLowestId) {
  Arena arena;
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(SampleToken(logits.data(), 4, Params(0.0f), 3, arena), 1);
  EXPECT_EQ(ArgMax(logits.data(), 4), 1);
}

TEST(SamplerTest, TemperatureSamplingFollowsSoftmax) {
  Arena arena;
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f};
  double z = 0;
  for (float l : logits) z += std::exp(l / 0.8);
  std::map<int, int> counts;
  const int n = 20000;
  for (int p = 0; p < n; ++p) ++counts[SampleToken(logits.data(), 4, Params(0.8f), p, arena)];
  for (int t = 0; t < 4; ++t) {
    EXPECT_NEAR(counts[t] / static_cast<double>(n), std::exp(logits[t] / 0.8) / z, 0.015) << t;
  }
}

// With a grammar's mask, sampling visits only the allowed tokens; the token drawn is
// the one the draw over every token gives when the disallowed logits are -inf, for
// masks of every density, temperatures, a logit bias, min_tokens and penalties.
TEST(SamplerTest, AMaskedDrawIsTheFullDrawOverMaskedLogits) {
  constexpr int kVocab = 1003;  // a partial last mask word
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  Arena arena;
  uint64_t state = 17;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = static_cast<float>(next() % 2000) / 250.0f - 4.0f;
  const std::vector<int32_t> output = {5, 9, 9, 12};
  for (int density : {1, 3, 50, 500, 1003}) {
    std::vector<uint32_t> mask((kVocab + 31) / 32, 0u);
    for (int i = 0; i < density; ++i) {
      const int t = density == kVocab ? i : static_cast<int>(next() % kVocab);
      mask[t / 32] |= 1u << (t % 32);
    }
    mask[0] |= 1u << 9;  // an allowed token the penalties touch
    std::vector<float> masked = logits;
    for (int t = 0; t < kVocab; ++t) {
      if (!((mask[t / 32] >> (t % 32)) & 1u)) masked[t] = kNegInf;
    }
    for (float temperature : {0.5f, 1.0f, 1.7f}) {
      sched::SamplingParams params = Params(temperature, 0, 1.0f, next());
      params.logit_bias = {{9, 1.5f}, {10, 2.0f}};
      params.min_tokens = 8;
      params.presence_penalty = 0.3f;
      params.repetition_penalty = 1.2f;
      SamplingHistory with_mask{{}, output, {}, kVocab - 1, mask};
      SamplingHistory full{{}, output, {}, kVocab - 1, {}};
      for (int64_t position = 0; position < 300; ++position) {
        ASSERT_EQ(SampleToken(logits.data(), kVocab, params, position, arena, with_mask),
                  SampleToken(masked.data(), kVocab, params, position, arena, full))
            << "density " << density << " temperature " << temperature << " position "
            << position;
      }
    }
  }
}

// Without penalties or top-k/top-p a masked request's draw (and argmax) visits only the
// allowed tokens. It gives the token of the full pass over the processed logits (forced
// here by a presence penalty that changes nothing: no output yet): greedy ties to the
// lowest id, token 0 allowed or not, logit_bias, min_tokens on EOS and stop tokens,
// and -1 when every allowed token is at -inf.
TEST(SamplerTest, TheMaskedPathWithoutPenaltiesIsTheFullPass) {
  constexpr int kVocab = 1003;  // a partial last mask word
  Arena arena;
  const uint32_t seed = 38;
  uint64_t state = seed;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<float> logits(kVocab);
  // Few distinct values, so the argmax often ties.
  for (float& l : logits) l = static_cast<float>(next() % 8) - 4.0f;
  const int32_t eos = 7;
  for (int density : {1, 2, 3, 50, 500, 1003}) {
    for (bool token0 : {false, true}) {
      std::vector<uint32_t> mask((kVocab + 31) / 32, 0u);
      for (int i = 0; i < density; ++i) {
        const int t = density == kVocab ? i : static_cast<int>(next() % kVocab);
        mask[t / 32] |= 1u << (t % 32);
      }
      if (density == 1) mask.assign(mask.size(), 0u), mask[0] = 1u << eos;  // only EOS
      if (density == 2) mask.assign(mask.size(), 0u), mask[0] = (1u << eos) | (1u << 12);
      if (token0) mask[0] |= 1u;
      else mask[0] &= ~1u;
      for (float temperature : {0.0f, 0.5f, 1.0f, 1.7f}) {
        for (int variant = 0; variant < 4; ++variant) {
          sched::SamplingParams params = Params(temperature, 0, 1.0f, next());
          if (variant & 1) params.logit_bias = {{12, 3.0f}, {0, 0.5f}, {12, -1.0f}, {40, 9.0f}};
          if (variant & 2) {
            params.min_tokens = 4;
            params.stop_token_ids = {12};
          }
          sched::SamplingParams full_params = params;
          full_params.presence_penalty = 0.5f;  // the full pass; no output: no effect
          const SamplingHistory history{{}, {}, {}, eos, mask};
          for (int64_t position = 0; position < 40; ++position) {
            ASSERT_EQ(SampleToken(logits.data(), kVocab, params, position, arena, history),
                      SampleToken(logits.data(), kVocab, full_params, position, arena, history))
                << "seed " << seed << " density " << density << " token0 " << token0
                << " temperature " << temperature << " variant " << variant << " position "
                << position;
          }
        }
      }
    }
  }
  // Only EOS allowed and min_tokens not reached: a dead end, as the full pass says.
  std::vector<uint32_t> only_eos((kVocab + 31) / 32, 0u);
  only_eos[0] = 1u << eos;
  sched::SamplingParams params = Params(0.0f);
  params.min_tokens = 2;
  EXPECT_EQ(SampleToken(logits.data(), kVocab, params, 0, arena, {{}, {}, {}, eos, only_eos}), -1);
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  Arena arena;
  const std::vector<float> logits = {1.0f, 3.0f, 2.9f, 2.8f, 0.0f, 2.7f};
  std::map<int, int> top_k;
  std::map<int, int> top_p;
  for (int p = 0; p < 4000; ++p) {
    ++top_k[SampleToken(logits.data(), 6, Params(1.0f, 3), p, arena)];
    ++top_p[SampleToken(logits.data(), 6, Params(1.0f, 0, 0.5f), p, arena)];
    EXPECT_EQ(SampleToken(logits.data(), 6, Params(1.5f, 1), p, arena), 1);
    EXPECT_EQ(SampleToken(logits.data(), 6, Params(1.5f, 0, 1e-6f), p, arena), 1);
  }
  EXPECT_EQ(top_k.size(), 3u);
  EXPECT_GT(top_k[1], 0);
  EXPECT_GT(top_k[2], 0);
  EXPECT_GT(top_k[3], 0);
  // Probabilities ~ e^3, e^2.9, e^2.8, e^2.7 of the top four: two reach 0.5 of the mass.
  EXPECT_EQ(top_p.size(), 2u);
  EXPECT_GT(top_p[1], top_p[2]);
}

TEST(SamplerTest, SameSeedAndPositionSameToken) {
  Arena arena;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 1.7f);
  int differs = 0;
  for (int p = 0; p < 200; ++p) {
    const int32_t a = SampleToken(logits.data(), 50, Params(1.0f, 20, 0.9f, 7), p, arena);
    arena.Reset();
    EXPECT_EQ(a, SampleToken(logits.data(), 50, Params(1.0f, 20, 0.9f, 7), p, arena));
    differs += a != SampleToken(logits.data(), 50, Params(1.0f, 20, 0.9f, 8), p, arena) ? 1 : 0;
  }
  EXPECT_GT(differs, 50);  // another seed is another stream
}

TEST(SamplerTest, LogprobsAreNormalisedAndSorted) {
  Arena arena;
  const std::vector<float> logits = {0.1f, 1.2f, -0.3f, 1.2f, 0.7f};
  const std::vector<TokenLogprob> lp = TokenLogprobs(logits.data(), 5, 4, 5, arena);
  ASSERT_EQ(lp.size(), 6u);
  EXPECT_EQ(lp[0].token, 4);
  double total = 0;
  for (size_t i = 1; i < lp.size(); ++i) total += std::exp(lp[i].logprob);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(lp[1].token, 1);  // tie with 3: lower id first
  EXPECT_EQ(lp[2].token, 3);
  EXPECT_EQ(lp[3].token, 4);
  EXPECT_FLOAT_EQ(lp[0].logprob, lp[3].logprob);
  EXPECT_EQ(TokenLogprobs(logits.data(), 5, 2, 0, arena).size(), 1u);
}

// Hand-computed expectations, vLLM's order: bias and min_tokens, then repetition over
// prompt + output, then frequency and presence over the output.
TEST(SamplerTest, ProcessLogitsAppliesBiasMinTokensAndPenalties) {
  Arena arena;
  const std::vector<float> logits = {1.0f, -2.0f, 3.0f, 0.5f, 2.0f, -1.0f};
  sched::SamplingParams params = Params(1.0f);
  const std::vector<int32_t> prompt = {1};
  const std::vector<int32_t> output = {2, 2};
  const std::vector<int32_t> pending = {3};
  const SamplingHistory history{prompt, output, pending, /*eos_token_id=*/5};
  // Nothing applies: the logits themselves.
  EXPECT_EQ(ProcessLogits(logits.data(), 6, params, history, arena), logits.data());

  params.logit_bias = {{0, 10.0f}, {4, -1.5f}};
  params.min_tokens = 4;  // 3 generated so far: EOS (5) and stop token 4 are masked
  params.stop_token_ids = {4};
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  const float* out = ProcessLogits(logits.data(), 6, params, history, arena);
  ASSERT_NE(out, logits.data());
  EXPECT_FLOAT_EQ(out[0], 11.0f);                        // bias only
  EXPECT_FLOAT_EQ(out[1], -4.0f);                        // in the prompt: repetition
  EXPECT_FLOAT_EQ(out[2], 3.0f / 2 - 2 * 0.5f - 0.25f);  // twice in the output
  EXPECT_FLOAT_EQ(out[3], 0.5f / 2 - 0.5f - 0.25f);      // pending counts as output
  EXPECT_EQ(out[4], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[5], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(logits[0], 1.0f);  // the input is not changed

  // Once min_tokens tokens exist, EOS and the stop tokens are free again.
  const std::vector<int32_t> longer = {2, 2, 3};
  out = ProcessLogits(logits.data(), 6, params, {prompt, longer, pending, 5}, arena);
  EXPECT_FLOAT_EQ(out[4], 2.0f - 1.5f);
  EXPECT_FLOAT_EQ(out[5], -1.0f);
  // ignore_eos leaves EOS alone but still masks the stop tokens.
  params.ignore_eos = true;
  out = ProcessLogits(logits.data(), 6, params, history, arena);
  EXPECT_FLOAT_EQ(out[5], -1.0f);
  EXPECT_EQ(out[4], -std::numeric_limits<float>::infinity());
}

TEST(SamplerTest, PenaltiesSteerGreedyAndSampledChoicesDeterministically) {
  Arena arena;
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  sched::SamplingParams greedy = Params(0.0f);
  const std::vector<int32_t> output = {0};
  EXPECT_EQ(SampleToken(logits.data(), 3, greedy, 4, arena, {{}, output, {}, -1}), 0);
  greedy.presence_penalty = 0.5f;
  EXPECT_EQ(SampleToken(logits.data(), 3, greedy, 4, arena, {{}, output, {}, -1}), 1);
  greedy.presence_penalty = 0.0f;
  greedy.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(SampleToken(logits.data(), 3, greedy, 4, arena), 2);
  // Stochastic: a pure function of (seed, position, history).
  sched::SamplingParams sampled = Params(1.0f);
  sampled.frequency_penalty = 1.0f;
  for (int p = 0; p < 50; ++p) {
    const int32_t a = SampleToken(logits.data(), 3, sampled, p, arena, {{}, output, {}, -1});
    arena.Reset();
    EXPECT_EQ(a, SampleToken(logits.data(), 3, sampled, p, arena, {{}, output, {}, -1}));
  }
}

// A continuation whose prompt ends with the earlier output processes the logits as the
// original did: the moved tokens count for the penalties and min_tokens as output.
TEST(SamplerTest, AContinuationSeesItsEarlierOutputAsOutput) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.5f};
  sched::SamplingParams params = Params(0.0f);
  params.presence_penalty = 0.7f;
  params.frequency_penalty = 0.3f;
  params.repetition_penalty = 1.4f;
  params.min_tokens = 4;
  params.stop_token_ids = {3};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {2, 4, 2};
  Arena arena;
  const SamplingHistory original{prompt, output, {}, 5};
  const float* want = ProcessLogits(logits.data(), 6, params, original, arena);
  for (int moved = 0; moved <= 3; ++moved) {
    std::vector<int32_t> continued = prompt;
    continued.insert(continued.end(), output.begin(), output.begin() + moved);
    const std::vector<int32_t> rest(output.begin() + moved, output.end());
    sched::SamplingParams cont = params;
    cont.num_generated_in_prompt = moved;
    const float* got = ProcessLogits(logits.data(), 6, cont, {continued, rest, {}, 5}, arena);
    for (int t = 0; t < 6; ++t) EXPECT_EQ(got[t], want[t]) << "moved " << moved << " token " << t;
    // Without the offset the moved tokens would count as prompt: different logits.
    if (moved > 0) {
      const float* naive = ProcessLogits(logits.data(), 6, params, {continued, rest, {}, 5}, arena);
      EXPECT_NE(std::vector<float>(naive, naive + 6), std::vector<float>(want, want + 6));
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

#include "runtime/engine/cpu/moe_route.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/engine/cpu/ops.h"

namespace lockstep::engine {

void RouteTopK(const float* logits, int num_experts, int k, bool renormalize, int* experts,
               float* weights, float* probs) {
  std::memcpy(probs, logits, num_experts * sizeof(float));
  Softmax(probs, num_experts);
  // Probabilities are >= 0 or NaN, so -inf marks a taken expert and -1 ranks a NaN
  // below every number (the CUDA routing kernel ranks them the same way).
  constexpr float kTaken = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < k; ++j) {  // k rounds of argmax; ties go to the lower id
    int best = -1;
    float best_key = kTaken;
    for (int e = 0; e < num_experts; ++e) {
      if (probs[e] == kTaken) continue;
      const float key = std::isnan(probs[e]) ? -1.0f : probs[e];
      if (best < 0 || key > best_key) {
        best = e;
        best_key = key;
      }
    }
    experts[j] = best;
    weights[j] = probs[best];
    probs[best] = kTaken;
  }
  // Ascending expert id: the combine order.
  for (int a = 1; a < k; ++a) {
    for (int b = a; b > 0 && experts[b - 1] > experts[b]; --b) {
      std::swap(experts[b - 1], experts[b]);
      std::swap(weights[b - 1], weights[b]);
    }
  }
  if (renormalize) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += weights[j];
    for (int j = 0; j < k; ++j) weights[j] /= sum;
  }
}

namespace {

// The index of the largest key among `n` not yet taken (ties: the lower index; a NaN
// ranks below every number); -1 when all are taken.
int ArgMax(const float* keys, const float* taken, int n) {
  int best = -1;
  float best_key = 0.0f;
  for (int e = 0; e < n; ++e) {
    if (taken[e] != 0.0f) continue;
    const float key = std::isnan(keys[e]) ? -std::numeric_limits<float>::infinity() : keys[e];
    if (best < 0 || key > best_key) {
      best = e;
      best_key = key;
    }
  }
  return best;
}

}  // namespace

void RouteGrouped(const float* logits, const float* bias, const GroupedRouting& rule, int* experts,
                  float* weights, float* scratch) {
  const int n = rule.num_experts;
  float* scores = scratch;
  float* choice = scratch + n;
  float* taken = scratch + 2 * n;  // 1: not choosable
  float* group_score = scratch + 3 * n;
  float* group_taken = group_score + rule.n_group;
  if (rule.sigmoid) {
    for (int e = 0; e < n; ++e) scores[e] = 1.0f / (1.0f + Exp(-logits[e]));
  } else {
    std::memcpy(scores, logits, n * sizeof(float));
    Softmax(scores, n);
  }
  for (int e = 0; e < n; ++e) choice[e] = scores[e] + (bias == nullptr ? 0.0f : bias[e]);
  // Each group's score: the sum of its best two choice scores.
  const int per_group = n / rule.n_group;
  std::fill(taken, taken + n, 0.0f);
  for (int g = 0; g < rule.n_group; ++g) {
    const float* c = choice + g * per_group;
    float* picked = taken + g * per_group;
    float sum = 0.0f;
    for (int j = 0; j < std::min(per_group, 2); ++j) {
      const int best = ArgMax(c, picked, per_group);
      picked[best] = 1.0f;
      sum += c[best];
    }
    group_score[g] = sum;
    group_taken[g] = 0.0f;
  }
  // Only the experts of the topk_group best groups stay choosable.
  std::fill(taken, taken + n, 1.0f);
  for (int j = 0; j < rule.topk_group; ++j) {
    const int g = ArgMax(group_score, group_taken, rule.n_group);
    group_taken[g] = 1.0f;
    std::fill(taken + g * per_group, taken + (g + 1) * per_group, 0.0f);
  }
  for (int j = 0; j < rule.k; ++j) {
    const int best = ArgMax(choice, taken, n);
    taken[best] = 1.0f;
    experts[j] = best;
    weights[j] = scores[best];
  }
  for (int a = 1; a < rule.k; ++a) {  // ascending expert id: the combine order
    for (int b = a; b > 0 && experts[b - 1] > experts[b]; --b) {
      std::swap(experts[b - 1], experts[b]);
      std::swap(weights[b - 1], weights[b]);
    }
  }
  if (rule.renormalize) {
    float sum = 0.0f;
    for (int j = 0; j < rule.k; ++j) sum += weights[j];
    for (int j = 0; j < rule.k; ++j) weights[j] /= sum;
  }
  for (int j = 0; j < rule.k; ++j) weights[j] *= rule.scaling;
}

}  // namespace lockstep::engine

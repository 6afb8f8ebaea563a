#include "runtime/engine/cpu/moe_route.h"

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

}  // namespace lockstep::engine

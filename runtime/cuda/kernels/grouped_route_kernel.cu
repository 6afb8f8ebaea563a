#include "runtime/cuda/kernels/grouped_route_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kRowsPerCta = 4;  // one thread per row

// The index of the largest of `n` keys not yet taken (ties: the lower index; a NaN
// ranks below every number); -1 when all are taken. As moe_route.cc's ArgMax.
__device__ int ArgMax(const float* keys, const bool* taken, int n) {
  int best = -1;
  float best_key = 0.0f;
  for (int e = 0; e < n; ++e) {
    if (taken[e]) continue;
    const float key = isnan(keys[e]) ? -INFINITY : keys[e];
    if (best < 0 || key > best_key) {
      best = e;
      best_key = key;
    }
  }
  return best;
}

// A row's scores and choice scores in shared memory; the rest in registers and local
// arrays. Same steps, same order as RouteGrouped.
__global__ void MoeRouteGroupedKernel(const float* logits, const float* bias, int rows,
                                      GroupedRouteRule rule, int32_t* experts_out,
                                      float* weights_out) {
  __shared__ float scores_all[kRowsPerCta][kMaxGroupedExperts];
  __shared__ float choice_all[kRowsPerCta][kMaxGroupedExperts];
  __shared__ bool taken_all[kRowsPerCta][kMaxGroupedExperts];
  const int slot = threadIdx.x;
  const int row = blockIdx.x * kRowsPerCta + slot;
  if (row >= rows) return;
  const int n = rule.num_experts;
  float* scores = scores_all[slot];
  float* choice = choice_all[slot];
  bool* taken = taken_all[slot];
  const float* x = logits + static_cast<int64_t>(row) * n;
  if (rule.sigmoid) {
    for (int e = 0; e < n; ++e) scores[e] = 1.0f / (1.0f + expf(-x[e]));
  } else {
    float max_value = -INFINITY;
    for (int e = 0; e < n; ++e) max_value = fmaxf(max_value, x[e]);
    float sum = 0.0f;
    for (int e = 0; e < n; ++e) {
      scores[e] = expf(x[e] - max_value);
      sum += scores[e];
    }
    for (int e = 0; e < n; ++e) scores[e] /= sum;
  }
  for (int e = 0; e < n; ++e) choice[e] = scores[e] + (bias == nullptr ? 0.0f : bias[e]);
  const int per_group = n / rule.n_group;
  float group_score[kMaxExpertGroups];
  bool group_taken[kMaxExpertGroups];
  for (int e = 0; e < n; ++e) taken[e] = false;
  for (int g = 0; g < rule.n_group; ++g) {
    float sum = 0.0f;
    for (int j = 0; j < (per_group < 2 ? per_group : 2); ++j) {
      const int best = ArgMax(choice + g * per_group, taken + g * per_group, per_group);
      taken[g * per_group + best] = true;
      sum += choice[g * per_group + best];
    }
    group_score[g] = sum;
    group_taken[g] = false;
  }
  for (int e = 0; e < n; ++e) taken[e] = true;
  for (int j = 0; j < rule.topk_group; ++j) {
    const int g = ArgMax(group_score, group_taken, rule.n_group);
    group_taken[g] = true;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) taken[e] = false;
  }
  int chosen[kMaxGroupedTopK];
  float weight[kMaxGroupedTopK];
  for (int j = 0; j < rule.k; ++j) {
    const int best = ArgMax(choice, taken, n);
    taken[best] = true;
    chosen[j] = best;
    weight[j] = scores[best];
  }
  for (int a = 1; a < rule.k; ++a) {  // ascending expert id
    for (int b = a; b > 0 && chosen[b - 1] > chosen[b]; --b) {
      const int e = chosen[b - 1];
      chosen[b - 1] = chosen[b];
      chosen[b] = e;
      const float w = weight[b - 1];
      weight[b - 1] = weight[b];
      weight[b] = w;
    }
  }
  if (rule.renormalize) {
    float sum = 0.0f;
    for (int j = 0; j < rule.k; ++j) sum += weight[j];
    for (int j = 0; j < rule.k; ++j) weight[j] /= sum;
  }
  for (int j = 0; j < rule.k; ++j) {
    experts_out[static_cast<int64_t>(row) * rule.k + j] = chosen[j];
    weights_out[static_cast<int64_t>(row) * rule.k + j] = weight[j] * rule.scaling;
  }
}

}  // namespace

cudaError_t LaunchMoeRouteGrouped(const float* logits, const float* bias, int rows,
                                  const GroupedRouteRule& rule, int32_t* experts, float* weights,
                                  cudaStream_t stream) {
  const int n = rule.num_experts;
  if (n < 1 || n > kMaxGroupedExperts || rule.k < 1 || rule.k > kMaxGroupedTopK ||
      rule.n_group < 1 || rule.n_group > kMaxExpertGroups || n % rule.n_group != 0 ||
      rule.topk_group < 1 || rule.topk_group > rule.n_group ||
      rule.k > rule.topk_group * (n / rule.n_group)) {
    return cudaErrorInvalidValue;
  }
  if (rows <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(MoeRouteGroupedKernel, (rows + kRowsPerCta - 1) / kRowsPerCta, kRowsPerCta, 0,
                  stream)
  (logits, bias, rows, rule, experts, weights);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels

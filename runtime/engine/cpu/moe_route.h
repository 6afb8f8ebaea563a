// MoE top-k routing of one token row, shared by the CPU engine (moe.h) and the CUDA
// routing kernel's checks: softmax over the router logits, k rounds of argmax (ties go
// to the lower expert id; a NaN probability ranks below every number, so a row with a
// NaN or infinite logit, whose probabilities are all NaN, picks experts 0..k-1 with NaN
// weights), the chosen experts in ascending id order (the combine order), weights
// renormalised over the k when `renormalize` (norm_topk_prob). The CUDA routing kernel
// (runtime/cuda/kernels/moe_kernels.h) follows the same rule.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_ROUTE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_ROUTE_H_

namespace lockstep::engine {

// Fills experts[0..k) and weights[0..k); `probs` is scratch for num_experts floats.
void RouteTopK(const float* logits, int num_experts, int k, bool renormalize, int* experts,
               float* weights, float* probs);

// The DeepSeek-V3 family's routing (ModelConfig's scoring, n_group, topk_group,
// e_score_correction_bias, norm_topk_prob, routed_scaling_factor).
struct GroupedRouting {
  int num_experts = 0;
  int k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool sigmoid = true;  // else softmax
  bool renormalize = true;
  float scaling = 1.0f;
};

// Scores s = sigmoid(logits) (or softmax); choice scores c = s + bias (bias null: 0).
// Each group of num_experts / n_group consecutive experts ranks by the sum of its best
// two choice scores (its one when a group has one expert); the topk_group best groups
// (ties: lower group) are eligible, and the k best eligible choice scores (ties: lower
// id) are chosen. Weights are the chosen experts' s (not c), divided by their sum when
// renormalize, times scaling; experts in ascending id order. A NaN ranks below every
// number. `scratch` holds 3 * num_experts + 2 * n_group floats.
void RouteGrouped(const float* logits, const float* bias, const GroupedRouting& rule, int* experts,
                  float* weights, float* scratch);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_ROUTE_H_

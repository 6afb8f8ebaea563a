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

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MOE_ROUTE_H_

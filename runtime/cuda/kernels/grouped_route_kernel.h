// Launcher of the DeepSeek-V3 family's MoE routing on the device: the CPU engine's
// RouteGrouped (runtime/engine/cpu/moe_route.h) per row of f32 router logits: sigmoid
// (or softmax) scores, the choice scores with e_score_correction_bias added, the
// topk_group best of n_group groups (by the sum of each group's best two choice scores),
// the k best choice scores among their experts (ties: lower id; a NaN ranks below every
// number), weighted by the unbiased scores, renormalised when asked, times the routed
// scaling factor; experts in ascending id order (the combine order of moe_kernels.h).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_ROUTE_KERNEL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_ROUTE_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/moe_desc.h"

namespace lockstep::cuda::kernels {

struct GroupedRouteRule {
  int32_t num_experts = 0;
  int32_t k = 0;
  int32_t n_group = 1;
  int32_t topk_group = 1;
  bool sigmoid = true;  // else softmax
  bool renormalize = true;
  float scaling = 1.0f;
};

// experts[row * k + j], weights[row * k + j] for each of `rows` rows of `logits`
// [rows][num_experts]; `bias` [num_experts] f32 device memory or null (no correction).
// cudaErrorInvalidValue beyond moe_desc.h's limits, for k > the eligible experts, or when
// n_group does not divide num_experts.
cudaError_t LaunchMoeRouteGrouped(const float* logits, const float* bias, int rows,
                                  const GroupedRouteRule& rule, int32_t* experts, float* weights,
                                  cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GROUPED_ROUTE_KERNEL_H_

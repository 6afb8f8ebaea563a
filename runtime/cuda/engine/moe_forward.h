// The MoE block of one layer on the device, part of the forward pass (forward_pass.h):
// the router GEMM (f32 logits), top-k routing (softmax, or the DeepSeek-V3 family's
// grouped sigmoid routing with its correction bias and scaling), the counting-sort permutation to experts,
// the dispatch layout (dest of every entry in the rank-major send layout of
// context.moe's capacity), the exchange of the rows and of the per-expert counts with
// every rank (expert parallelism; nothing with one rank), the grouped GEMMs of this
// rank's experts over what it received (a tile plan from the received counts), SiLU·mul,
// the exchange back, and the weighted combine in ascending expert order. All sizes come
// from the step's shape and capacity, none from the routing, so the host enqueues the
// same work whatever the tokens chose (and a CUDA graph can hold it).
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_MOE_FORWARD_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_MOE_FORWARD_H_

#include "absl/status/status.h"
#include "runtime/cuda/engine/forward_pass.h"

namespace lockstep::cuda {

// out[rows][hidden] = MoE of layer `layer` on x[rows][hidden] (rows: context.shape.rows).
template <typename T>
absl::Status EnqueueMoe(const ForwardContext& context, int layer, const T* x, T* out);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_MOE_FORWARD_H_

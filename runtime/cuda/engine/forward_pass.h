// The forward of one CUDA transformer over one packed step (step_layout.h), enqueued
// on the engine's stream: embedding (an MTP layer's model: its prologue,
// eh_proj([enorm(embedding); hnorm(previous hidden)]), runtime/engine/cpu/mtp_module.h)
// -> per layer RMSNorm, fused QKV (+ bias), q/k norm,
// RoPE, the K/V write through the block tables, decode and prefill attention (or
// multi-head latent attention: mla_forward.h), the O projection, RMSNorm and the SwiGLU
// MLP or the MoE block (plus the shared experts) -> final RMSNorm, the pick of the logit
// rows and the LM head (f32 logits). The same order of operations as the CPU
// transformer (runtime/engine/cpu/transformer.h), with the residual stream in the element
// type. Everything it touches lies in the weights, the KV pool and the scratch
// (forward_scratch.h), at addresses fixed for the model's life, and every shape comes
// from the step's StepShape, so a CUDA graph can capture it.
//
// MoE layers route, permute and run the experts with device counts (moe_kernels.h,
// grouped_gemm_kernel.h); with expert parallelism the rows travel through
// `exchange` with the same per-peer capacity on every rank.
//
// Thread-compatible: the engine thread enqueues.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_PASS_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_PASS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda/engine/device_weights.h"
#include "runtime/cuda/engine/forward_scratch.h"
#include "runtime/cuda/engine/step_layout.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::cuda {

// The expert-parallel all-to-all of the MoE layers: every rank sends each rank
// `count` elements (blocks back to back in rank order) and receives as many from each,
// stream-ordered on the forward's stream.
class ExpertExchange {
 public:
  enum class Type { kBf16, kF32, kInt32 };
  virtual ~ExpertExchange() = default;
  virtual int world_size() const = 0;
  virtual absl::Status AllToAll(const void* send, void* recv, int64_t count, Type type) = 0;
};

// Optional instrumentation of an eager forward (a benchmark's, cuda_engine_bench.cc):
// the pass calls Begin before its first kernel, Mark(segment) before each group of
// kernels (a GEMM, the attention of a layer) and Mark(kOther) after it, and End after
// its last kernel; each on the enqueuing thread with the forward's stream, so an
// implementation can record events there. Graph captures never carry one.
class ForwardTimer {
 public:
  enum class Segment { kGemm, kAttention, kOther };
  virtual ~ForwardTimer() = default;
  virtual void Begin(cudaStream_t stream) = 0;
  virtual void Mark(Segment segment, cudaStream_t stream) = 0;
  virtual void End(cudaStream_t stream) = 0;
};

// Optional test instrumentation of an eager forward's MoE routing (cuda_transformer_test,
// with the routing rule of runtime/engine/cpu/testing/forward_compare.h): after each
// MoE layer's router GEMM and route kernel the pass waits for the stream, hands the
// router logits [rows, experts] to Observe and, when Force fills `experts` and `weights`
// ([rows, k] each, ascending expert ids: the route kernel's format) and returns true,
// copies them over the kernel's choice (teacher-forced routing). Called on the
// enqueuing thread; graph captures never carry one (the waits would break a capture).
class RoutingHook {
 public:
  virtual ~RoutingHook() = default;
  virtual void Observe(int layer, const float* logits, int rows, int experts) = 0;
  virtual absl::StatusOr<bool> Force(int layer, int rows, int k, int32_t* experts,
                                     float* weights) = 0;
};

struct ForwardContext {
  const engine::ModelConfig* config = nullptr;
  const DeviceWeights* weights = nullptr;
  kernels::CublasLtGemm* gemm = nullptr;
  cudaStream_t stream = nullptr;
  std::byte* scratch = nullptr;  // the scratch allocation, laid out by `layout`
  const ScratchLayout* layout = nullptr;
  // This step: its shape and where its arrays are in the packed input
  // (scratch + layout->input), already on the device or about to be (stream order).
  StepShape shape;
  StepOffsets offsets;
  // The pool (storage and geometry); the step's tables are filled in by the pass.
  kernels::PagedKvDesc kv;
  MoeExchange moe;                     // this step's exchange shape
  ExpertExchange* exchange = nullptr;  // null: one rank
  ForwardTimer* timer = nullptr;       // null: not instrumented
  RoutingHook* routing = nullptr;      // null: not instrumented
};

// Enqueues `enqueue` (returning absl::Status) as one `segment` of the context's timer.
template <typename Fn>
absl::Status TimedSegment(const ForwardContext& c, ForwardTimer::Segment segment, Fn&& enqueue) {
  if (c.timer != nullptr) c.timer->Mark(segment, c.stream);
  const absl::Status status = enqueue();
  if (c.timer != nullptr) c.timer->Mark(ForwardTimer::Segment::kOther, c.stream);
  return status;
}

// T: kernels::Bf16 or float, the weights' and activations' element type.
template <typename T>
absl::Status EnqueueForward(const ForwardContext& context);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_PASS_H_

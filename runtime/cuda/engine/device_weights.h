// The weights of one model on the device, uploaded once at load from the same
// config.json + safetensors through the same weight plan as the CPU engine
// (runtime/engine/model/weight_plan.h): every matrix row-major [out, in] (the linear-layer
// layout cuBLASLt multiplies by), converted on the host to the engine's element type
// (bf16, or f32 in `cuda.dtype: f32`). With expert parallelism a rank uploads only its
// experts. A weight that does not fit is ResourceExhausted naming it, its shape, type
// and size, and the device's free memory.
//
// Immutable after Upload; read by the forward on the engine's stream.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_WEIGHTS_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_WEIGHTS_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/engine/device_memory.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::cuda {

struct DeviceLayer {
  const void* attn_norm = nullptr;
  const void* qkv = nullptr;       // [q_dim + 2 * kv_dim, hidden]
  const void* qkv_bias = nullptr;  // null without attention bias
  const void* q_norm = nullptr;    // null without q/k norm
  const void* k_norm = nullptr;
  const void* o = nullptr;  // [hidden, q_dim] (MLA: [hidden, heads * v_head_dim])
  // Multi-head latent attention (the DeepSeek-V3 family; qkv and its bias and norms are
  // then null): engine::MlaSource's weights (model/weight_plan.h).
  bool mla = false;
  const void* q_a = nullptr;  // [q_lora_rank, hidden]; null without q_lora_rank
  const void* q_a_norm = nullptr;
  const void* q_b = nullptr;  // [heads * qk_head_dim, q_lora_rank]
  const void* q = nullptr;    // [heads * qk_head_dim, hidden]: without q_lora_rank
  const void* kv_a = nullptr;       // [kv_lora_rank + qk_rope_head_dim, hidden]
  const void* kv_a_norm = nullptr;  // [kv_lora_rank]
  const void* kv_b = nullptr;       // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  const void* mlp_norm = nullptr;
  bool is_moe = false;
  const void* gate_up = nullptr;  // dense: [2 * width, hidden]
  const void* down = nullptr;     // dense: [hidden, width]
  const void* router = nullptr;   // MoE: [num_experts, hidden]
  const float* router_bias = nullptr;  // f32 e_score_correction_bias; null without one
  engine::ExpertRange local;      // MoE: this rank's experts
  // MoE: device arrays of local.size() device pointers (the grouped GEMM's weights).
  const void* const* expert_gate_up = nullptr;
  const void* const* expert_down = nullptr;
  // MoE: the shared experts (every rank; width 0 and null without them).
  int shared_width = 0;
  const void* shared_gate_up = nullptr;  // [2 * shared_width, hidden]
  const void* shared_down = nullptr;     // [hidden, shared_width]
};

// The MTP prologue's weights (runtime/engine/cpu/mtp_module.h): all null in a model
// that is not an MTP layer.
struct DeviceMtp {
  const void* enorm = nullptr;    // [hidden]
  const void* hnorm = nullptr;    // [hidden]
  const void* eh_proj = nullptr;  // [hidden, 2 * hidden]
};

// Where the MTP layer's own weights are (UploadWeights' `mtp`).
struct MtpSources {
  engine::WeightSource enorm, hnorm, eh_proj;
};

struct DeviceWeights {
  int element_bytes = 2;
  const void* embedding = nullptr;  // [vocab, hidden]
  std::vector<DeviceLayer> layers;
  const void* final_norm = nullptr;
  const void* lm_head = nullptr;      // the embedding when tied
  const double* inv_freq = nullptr;   // RoPE: rope_dim / 2 angles per position unit (YaRN's)
  float rope_magnitude = 1.0f;        // YaRN's factor on cos and sin (1 without)
  DeviceMtp mtp;                      // an MTP layer's prologue; null without
  size_t bytes = 0;                   // on the device, in all
  std::vector<DeviceBuffer> storage;  // owns everything above
};

// Reads and uploads `plan`'s weights to `device` (made current), and `mtp`'s where
// given. A plan's embedding or LM head without parts stays null (an MTP layer that
// shares the target's: its loader fills them in).
absl::StatusOr<DeviceWeights> UploadWeights(const engine::SafetensorsModel& tensors,
                                            const engine::ModelConfig& config,
                                            const engine::ModelPlan& plan, int element_bytes,
                                            int device, const MtpSources* mtp = nullptr);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_WEIGHTS_H_

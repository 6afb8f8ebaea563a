// The weights of one model in the CPU engine's form: f32, projections fused and packed
// for the batch-invariant GEMM. Loaded from safetensors (any of F32/F16/BF16) by the
// weight plan (model/weight_plan.h), every tensor checked by name and shape; with expert
// parallelism a rank loads only its experts.
//
// Immutable after loading; shared read-only by the forward.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_WEIGHTS_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::engine {

// A SwiGLU block: gate and up fused ([2 * width, hidden]: gate rows then up rows).
struct SwiGluWeights {
  int width = 0;
  PackedMatrix gate_up;
  PackedMatrix down;  // [hidden, width]
};

struct MoeWeights {
  PackedMatrix router;                 // [num_experts, hidden]
  ExpertRange local;                   // the experts this rank holds
  std::vector<SwiGluWeights> experts;  // experts[e - local.first]
};

struct LayerWeights {
  std::vector<float> attn_norm;
  PackedMatrix qkv;             // [q_dim + 2 * kv_dim, hidden]: q rows, k rows, v rows
  std::vector<float> qkv_bias;  // empty without attention bias
  std::vector<float> q_norm;    // empty without q/k norm
  std::vector<float> k_norm;
  PackedMatrix o;  // [hidden, q_dim]
  std::vector<float> mlp_norm;
  bool is_moe = false;
  SwiGluWeights mlp;  // dense layers
  MoeWeights moe;     // MoE layers
};

struct ModelWeights {
  std::vector<float> embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  PackedMatrix lm_head;  // [vocab, hidden]; the embedding when tied
};

// Loads every tensor of `config` from `tensors`; errors name the file and tensor.
absl::StatusOr<ModelWeights> LoadWeights(const SafetensorsModel& tensors, const ModelConfig& config,
                                         int rank, int world_size);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_WEIGHTS_H_

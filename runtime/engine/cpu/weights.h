// The weights of one model in the CPU engine's form: f32, projections fused and packed
// for the batch-invariant GEMM. Loaded from safetensors (F32/F16/BF16, and FP8
// dequantized by SafetensorsModel::ReadFloat) by the weight plan (model/weight_plan.h),
// every tensor checked by name and shape; with expert parallelism a rank loads only its
// routed experts (shared experts on every rank).
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
  std::vector<float> score_bias;       // e_score_correction_bias; empty without one
  ExpertRange local;                   // the contiguous sharding's experts (else empty)
  std::vector<int> held;               // the experts this rank holds, ascending
  std::vector<SwiGluWeights> experts;  // experts[i] is expert held[i]
  // replicas[e]: the ranks holding expert e, ascending (an expert placement,
  // runtime/eplb); empty: the contiguous sharding (ExpertOwner).
  std::vector<std::vector<int>> replicas;
};

// Multi-head latent attention (mla_attention.h).
struct MlaWeights {
  PackedMatrix q_a;  // [q_lora_rank, hidden]; empty without q_lora_rank
  std::vector<float> q_a_norm;
  PackedMatrix q_b;   // [heads * qk_head_dim, q_lora_rank]
  PackedMatrix q;     // [heads * qk_head_dim, hidden]: without q_lora_rank
  PackedMatrix kv_a;  // [kv_lora_rank + qk_rope_head_dim, hidden]
  std::vector<float> kv_a_norm;
  // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank] row-major: per head, the
  // rows of W_UK then of W_UV (the absorbed and the expanded form both read it).
  std::vector<float> kv_b;
};

struct LayerWeights {
  std::vector<float> attn_norm;
  bool mla = false;
  MlaWeights mla_w;             // under MLA (qkv and its bias and norms are then empty)
  PackedMatrix qkv;             // [q_dim + 2 * kv_dim, hidden]: q rows, k rows, v rows
  std::vector<float> qkv_bias;  // empty without attention bias
  std::vector<float> q_norm;    // empty without q/k norm
  std::vector<float> k_norm;
  PackedMatrix o;  // [hidden, q_dim]
  std::vector<float> mlp_norm;
  bool is_moe = false;
  SwiGluWeights mlp;     // dense layers
  MoeWeights moe;        // MoE layers
  SwiGluWeights shared;  // MoE layers' shared experts (width 0: none), on every rank
};

struct ModelWeights {
  std::vector<float> embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  PackedMatrix lm_head;  // [vocab, hidden]; the embedding when tied
};

// Loads one decoder layer planned by PlanWeights (the MTP module's, mtp_module.h).
absl::StatusOr<LayerWeights> LoadLayerWeights(const SafetensorsModel& tensors,
                                              const LayerSource& source);

// Loads every tensor of `config` from `tensors`; errors name the file and tensor. A
// `layout` places the routed experts (weight_plan.h); empty: the contiguous sharding.
absl::StatusOr<ModelWeights> LoadWeights(const SafetensorsModel& tensors, const ModelConfig& config,
                                         int rank, int world_size,
                                         const ExpertLayout& layout = {});

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_WEIGHTS_H_

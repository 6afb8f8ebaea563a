// Where each weight of the engine's form comes from: which Hugging Face tensors
// (tensor_names.h), stacked in which order, make it, and its shape. One plan serves
// every loader: the CPU transformer's (weights.h packs each matrix for its GEMM) and a
// device engine's (which converts each to its dtype and copies it to the device), so
// both read exactly the same tensors; with expert parallelism a rank's plan holds only
// its own experts.
//
//   const ModelPlan plan = PlanWeights(config, rank, world_size);
//   ASSIGN_OR_RETURN(std::vector<float> qkv, ReadWeight(tensors, plan.layers[0].qkv));
//
// Plain value types; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_WEIGHT_PLAN_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_WEIGHT_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"

namespace lockstep::engine {

// Experts [first, end) of `num_experts` are owned by `rank` of `world_size`
// (contiguous ranges, sizes differing by at most one).
struct ExpertRange {
  int first = 0;
  int end = 0;
  int size() const { return end - first; }
};
ExpertRange ExpertsOfRank(int num_experts, int rank, int world_size);
// The rank that owns `expert`.
int ExpertOwner(int num_experts, int world_size, int expert);

// One stored tensor of a weight: `rows` rows of the weight's `cols` columns.
struct TensorPart {
  std::string name;
  int rows = 0;
};

// A weight: a matrix [rows, cols] (row-major, the parts' rows stacked in order) or,
// with cols == 0, a vector of `rows` elements (its parts concatenated).
struct WeightSource {
  std::string label;  // names the weight in errors, e.g. "model.layers.3.qkv"
  std::vector<TensorPart> parts;
  int rows = 0;  // the sum of the parts' rows
  int cols = 0;

  bool is_vector() const { return cols == 0; }
  size_t elements() const {
    return static_cast<size_t>(rows) * static_cast<size_t>(is_vector() ? 1 : cols);
  }
};

// A SwiGLU block: gate and up fused ([2 * width, hidden]: gate rows, then up rows).
struct SwiGluSource {
  int width = 0;
  WeightSource gate_up;
  WeightSource down;  // [hidden, width]
};

// Multi-head latent attention's weights (model_config.h MlaDims; tensor_names.h).
struct MlaSource {
  WeightSource q_a;        // [q_lora_rank, hidden]; no parts without q_lora_rank
  WeightSource q_a_norm;   // [q_lora_rank]
  WeightSource q_b;        // [heads * qk_head_dim, q_lora_rank]
  WeightSource q;          // [heads * qk_head_dim, hidden]: q_proj when q_lora_rank is null
  WeightSource kv_a;       // [kv_lora_rank + qk_rope_head_dim, hidden]
  WeightSource kv_a_norm;  // [kv_lora_rank]
  WeightSource kv_b;       // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
};

struct LayerSource {
  WeightSource attn_norm;
  WeightSource qkv;  // [q_dim + 2 * kv_dim, hidden]: q rows, k rows, v rows (no parts
                     // under MLA)
  bool mla = false;
  MlaSource mla_parts;    // under MLA
  WeightSource qkv_bias;  // vector of q_dim + 2 * kv_dim; no parts without attention bias
  WeightSource q_norm;    // [head_dim] vectors; no parts without q/k norm
  WeightSource k_norm;
  WeightSource o;  // [hidden, q_dim] (MLA: [hidden, heads * v_head_dim])
  WeightSource mlp_norm;
  bool is_moe = false;
  SwiGluSource mlp;                   // dense layers
  WeightSource router;                // MoE layers: [num_experts, hidden]
  WeightSource router_bias;           // e_score_correction_bias; no parts without one
  ExpertRange local;                  // MoE layers: the experts this rank holds
  std::vector<SwiGluSource> experts;  // experts[e - local.first]
  // The experts this rank holds, ascending: experts[i] is expert held[i]. With an
  // ExpertLayout for the layer, `local` is empty and `held` is authoritative, and
  // `layout` is that layer's experts per rank (empty: the contiguous sharding).
  std::vector<int> held;
  std::vector<std::vector<int>> layout;
  // Shared experts (every rank holds them; width 0 and no parts without them).
  SwiGluSource shared;
};

struct ModelPlan {
  WeightSource embedding;  // [vocab, hidden]
  std::vector<LayerSource> layers;
  WeightSource final_norm;
  // [vocab, hidden]; the embedding's tensor when tied (a loader may share it).
  WeightSource lm_head;
  bool tied_lm_head = false;

  // Every weight of the plan with parts, in load order (the tied head once).
  std::vector<const WeightSource*> All() const;
  // Elements of all of them.
  size_t TotalElements() const;
};

// Which experts each rank holds: layout[layer][rank], ascending (runtime/eplb's
// placement, replicas allowed). A layer without an entry (or an empty entry) has the
// contiguous sharding, ExpertsOfRank.
using ExpertLayout = std::vector<std::vector<std::vector<int>>>;

// The plan of `config` for `rank` of `world_size` (its experts only).
ModelPlan PlanWeights(const ModelConfig& config, int rank, int world_size,
                      const ExpertLayout& layout = {});

// Reads `weight` as f32, row-major; every part is checked by name and shape, errors
// name the tensor and the file.
absl::StatusOr<std::vector<float>> ReadWeight(const SafetensorsModel& tensors,
                                              const WeightSource& weight);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_WEIGHT_PLAN_H_

#include "runtime/engine/cpu/mtp_module.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/ops.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::engine {
namespace {

// A weight of one stored tensor: [rows, cols], or a vector of `rows` with cols 0.
WeightSource One(const std::string& name, int rows, int cols) {
  WeightSource w;
  w.label = name;
  w.parts = {{name, rows}};
  w.rows = rows;
  w.cols = cols;
  return w;
}

}  // namespace

absl::StatusOr<ModelConfig> MtpTargetConfig(const std::string& dir) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  if (!config.is_deepseek()) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative.method mtp needs a DeepSeek-V3-family model; ", dir,
                     " has model_type '", config.model_type, "'"));
  }
  if (config.num_nextn_predict_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative.method mtp: the model in ", dir,
                     " has no MTP layer (num_nextn_predict_layers is 0)"));
  }
  return config;
}

ModelConfig MtpLayerConfig(const ModelConfig& target) {
  const int index = target.num_layers;
  ModelConfig config = target;
  config.num_layers = 1;
  config.moe_layer.assign(1, target.is_moe() && index >= target.first_k_dense_replace &&
                                 index % std::max(target.moe_layer_freq, 1) == 0);
  config.first_k_dense_replace = config.moe_layer[0] ? 0 : 1;
  config.num_nextn_predict_layers = 0;
  return config;
}

absl::StatusOr<kv::BlockLayout> MtpModule::BlockLayout(const std::string& dir,
                                                       int tokens_per_block) {
  ASSIGN_OR_RETURN(ModelConfig target, MtpTargetConfig(dir));
  const ModelConfig config = MtpLayerConfig(target);
  const kv::BlockLayout layout{1, config.cache_kv_heads(), config.cache_head_dim(),
                               tokens_per_block};
  RETURN_IF_ERROR(layout.Validate());
  return layout;
}

absl::StatusOr<std::unique_ptr<MtpModule>> MtpModule::Load(const std::string& dir,
                                                           ExpertGroup group) {
  ASSIGN_OR_RETURN(ModelConfig target, MtpTargetConfig(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModel> tensors, SafetensorsModel::Open(dir));
  const int index = target.num_layers;
  const int hidden = target.hidden_size;
  const int vocab = target.vocab_size;
  const ModelConfig config = MtpLayerConfig(target);

  // The layer's plan: the target's with one more layer, of which the last is the MTP's.
  ModelConfig extended = target;
  extended.num_layers = index + 1;
  extended.moe_layer.push_back(config.moe_layer[0]);
  const ModelPlan plan = PlanWeights(extended, group.rank, group.world_size);
  ModelWeights weights;
  ASSIGN_OR_RETURN(LayerWeights layer, LoadLayerWeights(*tensors, plan.layers[index]));
  weights.layers.push_back(std::move(layer));
  ASSIGN_OR_RETURN(weights.final_norm,
                   ReadWeight(*tensors, One(LayerName(index, "shared_head.norm.weight"), hidden, 0)));
  std::string head = LayerName(index, "shared_head.head.weight");
  if (!tensors->Contains(head)) head = target.tie_word_embeddings ? EmbeddingName() : LmHeadName();
  ASSIGN_OR_RETURN(std::vector<float> head_values, ReadWeight(*tensors, One(head, vocab, hidden)));
  weights.lm_head = PackedMatrix::Pack(head_values, vocab, hidden);

  auto module = std::unique_ptr<MtpModule>(new MtpModule());
  module->eps_ = static_cast<float>(target.rms_norm_eps);
  std::string embedding = LayerName(index, "embed_tokens.weight");
  if (!tensors->Contains(embedding)) embedding = EmbeddingName();
  ASSIGN_OR_RETURN(module->embedding_, ReadWeight(*tensors, One(embedding, vocab, hidden)));
  ASSIGN_OR_RETURN(module->enorm_,
                   ReadWeight(*tensors, One(LayerName(index, "enorm.weight"), hidden, 0)));
  ASSIGN_OR_RETURN(module->hnorm_,
                   ReadWeight(*tensors, One(LayerName(index, "hnorm.weight"), hidden, 0)));
  ASSIGN_OR_RETURN(std::vector<float> eh,
                   ReadWeight(*tensors, One(LayerName(index, "eh_proj.weight"), hidden, 2 * hidden)));
  module->eh_proj_ = PackedMatrix::Pack(eh, hidden, 2 * hidden);
  module->layer_ = Transformer::Create(config, std::move(weights), "mtp", group);
  return module;
}

absl::StatusOr<const float*> MtpModule::Forward(const ForwardInput& input,
                                                const float* previous_hidden, float* hidden_out,
                                                const KvPoolView& pool, Arena& arena,
                                                ThreadPool* threads) const {
  const int m = static_cast<int>(input.rows.size());
  const int hidden = hidden_size();
  const size_t rows = static_cast<size_t>(m) + 1;  // never a zero-size allocation
  float* both = arena.Alloc<float>(rows * 2 * hidden);
  float* x = arena.Alloc<float>(rows * hidden);
  for (int i = 0; i < m; ++i) {
    float* row = both + static_cast<size_t>(i) * 2 * hidden;
    RmsNorm(embedding_.data() + static_cast<size_t>(input.rows[i].token) * hidden, enorm_.data(),
            hidden, eps_, row);
    RmsNorm(previous_hidden + static_cast<size_t>(i) * hidden, hnorm_.data(), hidden, eps_,
            row + hidden);
  }
  Gemm(both, m, 2 * hidden, eh_proj_, nullptr, x, hidden, threads);
  ForwardInput layer_input = input;
  layer_input.input_hidden = x;
  layer_input.hidden_out = hidden_out;
  return layer_->Forward(layer_input, pool, arena, threads);
}

}  // namespace lockstep::engine

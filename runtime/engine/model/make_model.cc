#include "runtime/engine/model/make_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/fp8.h"
#include "runtime/engine/model/make_model_tokenizer.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

// Gains of the weight structure (see the file comment of make_model.h).
constexpr double kLayerGain = 1.3;   // scale of each layer's residual contribution
constexpr double kHeadGain = 1.0;    // strength of the next-token map in the LM head
constexpr double kHeadNoise = 0.5;   // unstructured part of the LM head
constexpr double kRouterGain = 3.0;  // sharpness of MoE routing
constexpr double kRouterBiasScale = 0.1;  // e_score_correction_bias (choice only)
constexpr int kDeepseekShards = 3;        // safetensors files of the DeepSeek presets
constexpr float kMtpHiddenMix = 0.1f;     // eh_proj's weight on the previous hidden state

// A counter-based stream: the values of a tensor depend only on (seed, name, salt).
class Stream {
 public:
  Stream(uint64_t seed, absl::string_view name, absl::string_view salt) {
    Fnv1a64 h;  // of salt + name
    h.Add(salt);
    h.AddByte(0xff);
    h.Add(name);
    state_ = SplitMix64(seed ^ SplitMix64(h.value()));
  }
  uint64_t Next() { return SplitMix64(state_++); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Irwin-Hall(4), rescaled to unit variance: plain arithmetic, so files are
  // reproducible bit for bit on any machine.
  double Normal() { return (Uniform() + Uniform() + Uniform() + Uniform() - 2.0) * std::sqrt(3.0); }

 private:
  uint64_t state_;
};

// Standard deviation of a tensor's random part, by role.
double RoleScale(const ModelConfig& config, const TensorSpec& spec) {
  const double hidden = config.hidden_size;
  switch (spec.role) {
    case TensorRole::kEmbedding:
      return 1.0;
    case TensorRole::kNorm:
      return 0.1;
    case TensorRole::kAttentionIn:  // MLA's q_b / kv_b take a latent, not the hidden state
      return 1.0 / std::sqrt(config.mla ? static_cast<double>(spec.shape[1]) : hidden);
    case TensorRole::kAttentionBias:
      return 0.1;
    case TensorRole::kAttentionOut:
      return kLayerGain / std::sqrt(static_cast<double>(config.mla ? spec.shape[1]
                                                                   : config.q_dim()));
    case TensorRole::kMlpIn:
      return 1.0 / std::sqrt(hidden);
    case TensorRole::kMlpOut:
      return kLayerGain / std::sqrt(static_cast<double>(spec.shape[1]));
    case TensorRole::kRouter:
      return kRouterGain / std::sqrt(hidden);
    case TensorRole::kRouterBias:
      return kRouterBiasScale;
    case TensorRole::kLmHead:
      return kHeadNoise / std::sqrt(hidden);
  }
  return 1.0;
}

std::vector<float> RandomValues(const ModelConfig& config, const TensorSpec& spec, uint64_t seed,
                                absl::string_view salt) {
  int64_t n = 1;
  for (int64_t dim : spec.shape) n *= dim;
  std::vector<float> values(n);
  Stream stream(seed, spec.name, salt);
  const double scale = RoleScale(config, spec);
  const double mean = spec.role == TensorRole::kNorm ? 1.0 : 0.0;
  for (float& v : values) v = static_cast<float>(mean + scale * stream.Normal());
  return values;
}

// The LM head: for every token t, the row of next(t) gains E[t], so the model's
// default continuation of t is next(t) (a token in 0..255 or EOS; never BOS or an
// unused id).
std::vector<float> LmHeadValues(const ModelConfig& config, const TensorSpec& spec, uint64_t seed,
                                const std::vector<float>& embedding) {
  std::vector<float> head = RandomValues(config, spec, seed, "");
  const int hidden = config.hidden_size;
  const int vocab = config.vocab_size;
  Stream map(seed, "next-token-map", "");
  const double gain = kHeadGain / std::sqrt(static_cast<double>(hidden));
  for (int t = 0; t < vocab; ++t) {
    int next = static_cast<int>(map.Next() % 257);  // 0..255 or 256 -> EOS
    if (next == 256) next = kByteEosToken;
    if (next >= vocab) next = vocab - 1;
    for (int j = 0; j < hidden; ++j) {
      head[static_cast<size_t>(next) * hidden + j] +=
          static_cast<float>(gain * embedding[static_cast<size_t>(t) * hidden + j]);
    }
  }
  return head;
}

// The DeepSeek presets' layout (ids of make_model_tokenizer.h).
bool HasDeepseekTokenizerLayout(const ModelConfig& config) {
  return config.is_deepseek() && config.vocab_size >= DeepseekTokenizerVocabSize() &&
         config.bos_token_id == kByteBosToken && config.eos_token_id == kByteEosToken;
}

absl::Status WriteTokenizer(const ModelConfig& config, const std::string& dir) {
  if (HasDeepseekTokenizerLayout(config)) return WriteDeepseekTokenizer(config, dir);
  const nlohmann::json tokenizer = {{"type", "byte_level"},
                                    {"vocab_size", config.vocab_size},
                                    {"bos_token_id", kByteBosToken},
                                    {"eos_token_id", kByteEosToken}};
  return WriteStringToFile(JoinPath(dir, "lockstep_tokenizer.json"), tokenizer.dump(2) + "\n");
}

// DeepSeek-V3's architecture at a small size: MLA with a q LoRA, one dense layer then
// MoE layers of 8 routed experts in 4 groups (top 2 groups, top 2 experts) plus a
// shared expert, sigmoid scores with the correction bias, YaRN beyond 256 positions.
// Widths that are not multiples of 128 give FP8 partial edge blocks.
void DeepseekPreset(ModelConfig& config) {
  config.model_type = "deepseek_v3";
  config.vocab_size = 320;
  config.hidden_size = 192;
  config.num_layers = 3;
  config.num_heads = 4;
  config.num_kv_heads = 4;
  config.rms_norm_eps = 1e-6;
  config.max_position = 1024;
  config.mla = true;
  config.mla_dims = MlaDims{.q_lora_rank = 96,
                            .kv_lora_rank = 64,
                            .qk_nope_head_dim = 32,
                            .qk_rope_head_dim = 16,
                            .v_head_dim = 32};
  config.head_dim = config.mla_dims.qk_head_dim();
  config.yarn = true;
  config.yarn_scaling = YarnScaling{.factor = 4.0,
                                    .original_max_position = 256,
                                    .beta_fast = 32.0,
                                    .beta_slow = 1.0,
                                    .mscale = 1.0,
                                    .mscale_all_dim = 1.0};
  config.intermediate_size = 320;
  config.moe_intermediate_size = 64;
  config.num_experts = 8;
  config.num_experts_per_tok = 2;
  config.n_shared_experts = 1;
  config.n_group = 4;
  config.topk_group = 2;
  config.norm_topk_prob = true;
  config.routed_scaling_factor = 2.5;
  config.scoring = ExpertScoring::kSigmoid;
  config.score_correction_bias = true;
  config.first_k_dense_replace = 1;
  config.moe_layer_freq = 1;
  config.moe_naming = MoeNaming::kQwen;
  config.moe_layer.assign(config.num_layers, true);
  config.moe_layer[0] = false;
}

// The shard of each tensor: consecutive runs of about equal bytes, a scale with its
// weight (checkpoints are split this way, by size in tensor order).
std::vector<int> ShardOf(const std::vector<TensorToWrite>& tensors, int shards) {
  size_t total = 0;
  for (const TensorToWrite& t : tensors) total += t.values.size() * DTypeSize(t.dtype);
  std::vector<int> shard(tensors.size());
  size_t before = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const bool scale = i > 0 && tensors[i].name == Fp8ScaleName(tensors[i - 1].name);
    shard[i] = scale ? shard[i - 1]
                     : std::min<int>(shards - 1, static_cast<int>(before * shards / total));
    before += tensors[i].values.size() * DTypeSize(tensors[i].dtype);
  }
  return shard;
}

// Writes model-0000k-of-0000n.safetensors and model.safetensors.index.json.
absl::Status WriteShards(const std::vector<TensorToWrite>& tensors, const std::string& dir,
                         int shards) {
  const std::vector<int> shard = ShardOf(tensors, shards);
  std::vector<std::vector<TensorToWrite>> files(shards);
  nlohmann::json weight_map = nlohmann::json::object();
  size_t total = 0;
  auto file_name = [shards](int k) {
    return absl::StrFormat("model-%05d-of-%05d.safetensors", k + 1, shards);
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    files[shard[i]].push_back(tensors[i]);
    weight_map[tensors[i].name] = file_name(shard[i]);
    total += tensors[i].values.size() * DTypeSize(tensors[i].dtype);
  }
  for (int k = 0; k < shards; ++k) {
    RETURN_IF_ERROR(WriteSafetensors(JoinPath(dir, file_name(k)), files[k]));
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}},
                                {"weight_map", weight_map}};
  return WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"), index.dump(2) + "\n");
}

}  // namespace

absl::Status MakeModelOptions::Validate() const {
  if (out_dir.empty()) return absl::InvalidArgumentError("out: an output directory is required");
  if (vocab_size < 0 || (vocab_size > 0 && (eos_token_id < 0 || eos_token_id >= vocab_size ||
                                            bos_token_id >= vocab_size))) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ids: vocab_size ", vocab_size,
                                                   ", bos ", bos_token_id, ", eos ", eos_token_id,
                                                   " do not fit a vocabulary"));
  }
  if (!(draft_perturbation >= 0.0 && draft_perturbation <= 10.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_perturbation must be in [0, 10], got ", draft_perturbation));
  }
  return PresetConfig(preset).status();
}

absl::StatusOr<ModelConfig> PresetConfig(const std::string& preset) {
  ModelConfig config;
  config.vocab_size = 272;
  config.hidden_size = 128;
  config.num_layers = 4;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.max_position = 4096;
  config.bos_token_id = kByteBosToken;
  config.eos_token_id = kByteEosToken;
  if (preset == "tiny") {
    config.model_type = "llama";
    config.intermediate_size = 384;
  } else if (preset == "tiny-moe") {
    config.model_type = "mixtral";
    config.intermediate_size = 192;
    config.moe_intermediate_size = 192;
    config.num_experts = 8;
    config.num_experts_per_tok = 2;
    config.norm_topk_prob = true;
    config.moe_naming = MoeNaming::kMixtral;
    config.moe_layer.assign(config.num_layers, true);
  } else if (preset == "tiny-dsv3" || preset == "tiny-dsv3-fp8" || preset == "tiny-dsv3-mtp") {
    DeepseekPreset(config);
    config.fp8.enabled = preset == "tiny-dsv3-fp8";
    if (preset == "tiny-dsv3-mtp") config.num_nextn_predict_layers = 1;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("preset: '", preset,
                     "' is not one of tiny, tiny-moe, tiny-dsv3, tiny-dsv3-fp8, tiny-dsv3-mtp"));
  }
  RETURN_IF_ERROR(config.Validate());
  return config;
}

DType PresetDefaultDType(const std::string& preset) {
  return absl::StartsWith(preset, "tiny-dsv3") ? DType::kBF16 : DType::kF32;
}

ModelConfig DraftConfigFor(const ModelConfig& target) {
  if (target.mla) {  // a plain llama of the same vocabulary and width
    ModelConfig base;
    base.model_type = "llama";
    base.vocab_size = target.vocab_size;
    base.hidden_size = target.hidden_size;
    base.num_heads = target.num_heads;
    base.num_kv_heads = target.num_heads;
    base.head_dim = target.hidden_size / target.num_heads;
    base.rms_norm_eps = target.rms_norm_eps;
    base.rope_theta = target.rope_theta;
    base.max_position = target.max_position;
    base.bos_token_id = target.bos_token_id;
    base.eos_token_id = target.eos_token_id;
    base.num_layers = 1;
    base.intermediate_size = target.moe_intermediate_size * 2;
    return base;
  }
  ModelConfig draft = target;
  draft.model_type = "llama";
  draft.num_layers = 1;
  draft.intermediate_size =
      target.is_moe() ? target.moe_intermediate_size : target.intermediate_size;
  draft.num_experts = 0;
  draft.num_experts_per_tok = 0;
  draft.moe_intermediate_size = 0;
  draft.moe_layer.clear();
  draft.qk_norm = false;
  draft.attention_bias = false;
  return draft;
}

std::vector<TensorToWrite> GenerateTensors(const ModelConfig& config, uint64_t seed, DType dtype,
                                           const ModelConfig* draft_of, double perturbation) {
  // The structure (embedding, LM head, shared layers) comes from the target.
  const ModelConfig& structure = draft_of != nullptr ? *draft_of : config;
  absl::flat_hash_map<std::string, TensorSpec> target_specs;
  for (const TensorSpec& spec : ModelTensorSpecs(structure)) target_specs[spec.name] = spec;

  std::vector<float> embedding;
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : ModelTensorSpecs(config)) {
    TensorToWrite tensor{spec.name, spec.shape, {}, dtype};
    auto shared = target_specs.find(spec.name);
    if (spec.role == TensorRole::kEmbedding) {
      embedding = RandomValues(structure, spec, seed, "");
      tensor.values = embedding;
    } else if (spec.role == TensorRole::kLmHead) {
      tensor.values = LmHeadValues(structure, spec, seed, embedding);
    } else if (shared != target_specs.end() && shared->second.shape == spec.shape) {
      tensor.values = RandomValues(structure, shared->second, seed, "");
      if (draft_of != nullptr && perturbation > 0.0) {
        Stream noise(seed, spec.name, "draft-perturbation");
        const double scale = perturbation * RoleScale(structure, spec);
        for (float& v : tensor.values) v += static_cast<float>(scale * noise.Normal());
      }
    } else {
      tensor.values = RandomValues(config, spec, seed, "draft");
    }
    if (spec.role == TensorRole::kRouterBias) tensor.dtype = DType::kF32;  // as checkpoints
    if (!spec.fp8) {
      tensors.push_back(std::move(tensor));
      continue;
    }
    // F8_E4M3 codes (stored as their values, which encode back exactly) and the scales.
    const Fp8Blocks blocks = QuantizeFp8Blocks(tensor.values, spec.shape[0], spec.shape[1]);
    tensor.dtype = DType::kF8E4M3;
    for (size_t i = 0; i < blocks.codes.size(); ++i) {
      tensor.values[i] = Fp8E4m3ToFloat(blocks.codes[i]);
    }
    TensorToWrite scale{Fp8ScaleName(spec.name), Fp8ScaleShape(spec.shape[0], spec.shape[1]),
                        blocks.scale_inv, DType::kF32};
    tensors.push_back(std::move(tensor));
    tensors.push_back(std::move(scale));
  }
  return tensors;
}

// The MTP layer (index L = num_layers) of a DeepSeek-family target, built to track the
// target: its decoder layer is a copy of the target's last layer (tensors and FP8
// scales), enorm and hnorm are ones, eh_proj = [I | kMtpHiddenMix * I] (mostly the next
// token's embedding, as the target's first layer sees it), shared_head.norm and
// shared_head.head copy the target's final norm and LM head; embed_tokens is left out
// (shared with the target's, as checkpoints may do).
void AppendMtpLayer(const ModelConfig& config, DType dtype, std::vector<TensorToWrite>& tensors) {
  const int last = config.num_layers - 1;
  const std::string from = LayerName(last, "");
  const int hidden = config.hidden_size;
  const size_t count = tensors.size();
  for (size_t i = 0; i < count; ++i) {
    if (!absl::StartsWith(tensors[i].name, from)) continue;
    TensorToWrite copy = tensors[i];
    copy.name = LayerName(config.num_layers, tensors[i].name.substr(from.size()));
    tensors.push_back(std::move(copy));
  }
  auto find = [&](const std::string& name) -> const TensorToWrite& {
    for (const TensorToWrite& t : tensors) {
      if (t.name == name) return t;
    }
    return tensors.front();  // not reached: the target's tensors are all there
  };
  const int64_t h = hidden;
  tensors.push_back({LayerName(config.num_layers, "enorm.weight"), {h},
                     std::vector<float>(hidden, 1.0f), dtype});
  tensors.push_back({LayerName(config.num_layers, "hnorm.weight"), {h},
                     std::vector<float>(hidden, 1.0f), dtype});
  std::vector<float> eh(static_cast<size_t>(hidden) * 2 * hidden, 0.0f);
  for (int j = 0; j < hidden; ++j) {
    eh[static_cast<size_t>(j) * 2 * hidden + j] = 1.0f;
    eh[static_cast<size_t>(j) * 2 * hidden + hidden + j] = kMtpHiddenMix;
  }
  tensors.push_back({LayerName(config.num_layers, "eh_proj.weight"), {h, 2 * h}, eh, dtype});
  TensorToWrite norm = find(FinalNormName());
  norm.name = LayerName(config.num_layers, "shared_head.norm.weight");
  tensors.push_back(std::move(norm));
  TensorToWrite head = find(config.tie_word_embeddings ? EmbeddingName() : LmHeadName());
  head.name = LayerName(config.num_layers, "shared_head.head.weight");
  tensors.push_back(std::move(head));
}

absl::Status WriteModel(const ModelConfig& config, const std::string& dir, uint64_t seed,
                        DType dtype, const ModelConfig* draft_of, double perturbation) {
  RETURN_IF_ERROR(config.Validate());
  RETURN_IF_ERROR(MakeDirectories(dir));
  RETURN_IF_ERROR(WriteStringToFile(JoinPath(dir, "config.json"), ModelConfigToJson(config)));
  std::vector<TensorToWrite> tensors = GenerateTensors(config, seed, dtype, draft_of, perturbation);
  if (draft_of == nullptr && config.is_deepseek() && config.num_nextn_predict_layers > 0) {
    AppendMtpLayer(config, dtype, tensors);
  }
  if (config.is_deepseek()) {
    RETURN_IF_ERROR(WriteShards(tensors, dir, kDeepseekShards));
  } else {
    RETURN_IF_ERROR(WriteSafetensors(JoinPath(dir, "model.safetensors"), tensors));
  }
  return WriteTokenizer(config, dir);
}

absl::Status MakeModel(const MakeModelOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(ModelConfig target, PresetConfig(options.preset));
  const bool real_tokenizer = options.vocab_size > 0;
  if (real_tokenizer) {
    target.vocab_size = options.vocab_size;
    target.bos_token_id = options.bos_token_id;
    target.eos_token_id = options.eos_token_id;
  }
  RETURN_IF_ERROR(WriteModel(target, options.out_dir, options.seed, options.dtype));
  if (options.with_draft) {
    const ModelConfig draft = DraftConfigFor(target);
    RETURN_IF_ERROR(WriteModel(draft, JoinPath(options.out_dir, "draft"), options.seed,
                               options.dtype, &target, options.draft_perturbation));
  }
  if (real_tokenizer) {  // the byte-level tokenizer does not describe this model
    std::error_code ignored;
    std::filesystem::remove(JoinPath(options.out_dir, "lockstep_tokenizer.json"), ignored);
    std::filesystem::remove(JoinPath(options.out_dir, "draft/lockstep_tokenizer.json"), ignored);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine

#include "runtime/engine/model/make_model.h"

#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

// Gains of the weight structure (see the file comment of make_model.h).
constexpr double kLayerGain = 1.3;   // scale of each layer's residual contribution
constexpr double kHeadGain = 1.0;    // strength of the next-token map in the LM head
constexpr double kHeadNoise = 0.5;   // unstructured part of the LM head
constexpr double kRouterGain = 3.0;  // sharpness of MoE routing

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
    case TensorRole::kAttentionIn:
      return 1.0 / std::sqrt(hidden);
    case TensorRole::kAttentionBias:
      return 0.1;
    case TensorRole::kAttentionOut:
      return kLayerGain / std::sqrt(static_cast<double>(config.q_dim()));
    case TensorRole::kMlpIn:
      return 1.0 / std::sqrt(hidden);
    case TensorRole::kMlpOut:
      return kLayerGain / std::sqrt(static_cast<double>(spec.shape[1]));
    case TensorRole::kRouter:
      return kRouterGain / std::sqrt(hidden);
    case TensorRole::kRouterBias:
      return 0.1;
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

absl::Status WriteTokenizer(const ModelConfig& config, const std::string& dir) {
  const nlohmann::json tokenizer = {{"type", "byte_level"},
                                    {"vocab_size", config.vocab_size},
                                    {"bos_token_id", kByteBosToken},
                                    {"eos_token_id", kByteEosToken}};
  return WriteStringToFile(JoinPath(dir, "lockstep_tokenizer.json"), tokenizer.dump(2) + "\n");
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
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("preset: '", preset, "' is not one of tiny, tiny-moe"));
  }
  RETURN_IF_ERROR(config.Validate());
  return config;
}

ModelConfig DraftConfigFor(const ModelConfig& target) {
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
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

absl::Status WriteModel(const ModelConfig& config, const std::string& dir, uint64_t seed,
                        DType dtype, const ModelConfig* draft_of, double perturbation) {
  RETURN_IF_ERROR(config.Validate());
  RETURN_IF_ERROR(MakeDirectories(dir));
  RETURN_IF_ERROR(WriteStringToFile(JoinPath(dir, "config.json"), ModelConfigToJson(config)));
  RETURN_IF_ERROR(WriteSafetensors(JoinPath(dir, "model.safetensors"),
                                   GenerateTensors(config, seed, dtype, draft_of, perturbation)));
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

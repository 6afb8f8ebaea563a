// `lockstep make-model`: writes a small model with seeded random weights, and its draft.
//
//   DIR/config.json, DIR/model.safetensors, DIR/lockstep_tokenizer.json
//   DIR/draft/{config.json, model.safetensors, lockstep_tokenizer.json}
//
// The tokenizer is byte level: tokens 0..255 are bytes, 256 is BOS, 257 is EOS.
// Random transformers emit noise, so the weights carry a structure that target and
// draft share: a seeded "next token" map encoded in the LM head against the shared
// embedding, which the layers bend depending on the context. The draft (one layer)
// copies the target's first layer and perturbs it by `draft_perturbation` (relative
// noise), so greedy draft acceptance is neither 0 nor 1: at the default, about 0.7
// (K = 1) to 0.5 (K = 4) for tiny, 0.8 to 0.6 for tiny-moe (docs/perf.md "## engine").
//
// The DeepSeek-V3-family presets (tiny-dsv3, and tiny-dsv3-fp8 with the FP8 checkpoint
// format: the layers' projections F8_E4M3 with 128 x 128 block scales, the rest in
// `dtype`, the routers' correction bias f32) are written as a real checkpoint is:
// three safetensors shards with model.safetensors.index.json, and the Hugging Face
// tokenizer files of make_model_tokenizer.h (tokenizer.json with DeepSeek-V3's
// pre-tokenizer rules, tokenizer_config.json with its chat template's shape) instead
// of lockstep_tokenizer.json; the draft is a one-layer llama.
// tiny-dsv3-mtp adds one multi-token-prediction layer (num_nextn_predict_layers 1,
// tensors model.layers.3.{enorm,hnorm,eh_proj,shared_head.*} and a decoder layer)
// built to track the target: a copy of its last layer fed mostly with the next token's
// embedding (AppendMtpLayer in make_model.cc); its measured acceptance is in
// docs/perf.md ("## MTP").
//
// Output files are a pure function of (preset, seed, draft_perturbation, dtype).
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"

namespace lockstep::engine {

inline constexpr double kDefaultDraftPerturbation = 0.6;
inline constexpr int32_t kByteBosToken = 256;
inline constexpr int32_t kByteEosToken = 257;

struct MakeModelOptions {
  // tiny | tiny-moe | tiny-dsv3 | tiny-dsv3-fp8 | tiny-dsv3-mtp
  std::string preset = "tiny";
  std::string out_dir;
  uint64_t seed = 1;
  double draft_perturbation = kDefaultDraftPerturbation;
  bool with_draft = true;
  DType dtype = DType::kF32;  // storage type of the weights (PresetDefaultDType)
  // A real tokenizer's vocabulary size and BOS / EOS ids (make-model --tokenizer): the
  // model gets them instead of the byte-level tokenizer's, and no
  // lockstep_tokenizer.json is written. 0 / -1: the preset's.
  int32_t vocab_size = 0;
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;

  absl::Status Validate() const;
};

absl::Status MakeModel(const MakeModelOptions& options);

// The architecture of a preset ("tiny": llama, "tiny-moe": mixtral 8 experts top-2,
// "tiny-dsv3" and "tiny-dsv3-fp8": deepseek_v3, MLA, 8 routed experts + 1 shared).
absl::StatusOr<ModelConfig> PresetConfig(const std::string& preset);

// The storage type a preset's checkpoint has: bf16 for the DeepSeek presets, else f32.
DType PresetDefaultDType(const std::string& preset);

// The draft architecture for `target`: a dense llama with fewer layers and the same
// vocabulary, heads and hidden size.
ModelConfig DraftConfigFor(const ModelConfig& target);

// Writes config.json, model.safetensors and lockstep_tokenizer.json for `config` to
// `dir` with seeded weights (the DeepSeek family: shards, an index and the Hugging Face
// tokenizer files, see above). With `draft_of` set, `config` is a draft of that target:
// tensors it shares by name and shape are the target's plus `perturbation` noise.
absl::Status WriteModel(const ModelConfig& config, const std::string& dir, uint64_t seed,
                        DType dtype, const ModelConfig* draft_of = nullptr,
                        double perturbation = 0.0);

// The tensors WriteModel writes (for tests that damage or reshape them).
std::vector<TensorToWrite> GenerateTensors(const ModelConfig& config, uint64_t seed, DType dtype,
                                           const ModelConfig* draft_of, double perturbation);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_H_

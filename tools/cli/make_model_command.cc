#include "tools/cli/make_model_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/make_model.h"
#include "runtime/router/text/model_text.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

// --tokenizer DIR: the model takes the tokenizer's vocabulary size and BOS / EOS ids.
absl::Status UseTokenizer(const std::string& dir, engine::MakeModelOptions* options) {
  absl::StatusOr<router::ModelText> text = router::LoadModelText(dir);
  if (!text.ok()) return text.status();
  if (!text->tokenizer->is_hf()) {
    return absl::InvalidArgumentError(absl::StrCat("--tokenizer: ", dir, " has no tokenizer.json"));
  }
  options->vocab_size = text->tokenizer->vocab_size();
  options->bos_token_id = text->bos_token_id.value_or(-1);
  options->eos_token_id = text->eos_token_id.has_value() ? *text->eos_token_id
                          : text->eos_token_ids.empty()  ? -1
                                                         : text->eos_token_ids[0];
  if (options->eos_token_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer: ", dir, " names no EOS token (tokenizer_config.json eos_token)"));
  }
  return absl::OkStatus();
}

// Copies the tokenizer files into the model; generation_config.json is written from the
// EOS id when the tokenizer directory has none.
absl::Status CopyTokenizerFiles(const std::string& dir, const engine::MakeModelOptions& options) {
  namespace fs = std::filesystem;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    const fs::path from = fs::path(dir) / name;
    if (!fs::exists(from)) continue;
    std::error_code error;
    fs::copy_file(from, fs::path(options.out_dir) / name, fs::copy_options::overwrite_existing,
                  error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot copy ", from.string(), " to ",
                                              options.out_dir, ": ", error.message()));
    }
  }
  const fs::path generation = fs::path(options.out_dir) / "generation_config.json";
  if (!fs::exists(generation)) {
    nlohmann::json config = {{"eos_token_id", options.eos_token_id}};
    if (options.bos_token_id >= 0) config["bos_token_id"] = options.bos_token_id;
    std::ofstream(generation) << config.dump(2) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

int RunMakeModelCommand(const std::vector<std::string>& args) {
  engine::MakeModelOptions options;
  int64_t seed = static_cast<int64_t>(options.seed);
  std::string dtype;  // "": the preset's (PresetDefaultDType)
  FlagSet flags("make-model");
  flags.AddString("preset", &options.preset,
                  "tiny | tiny-moe | tiny-dsv3 | tiny-dsv3-fp8 | tiny-dsv3-mtp");
  flags.AddPath("out", &options.out_dir, "output directory (the draft goes to OUT/draft)");
  flags.AddInt("seed", &seed, "seed of the random weights");
  flags.AddDouble("draft-perturbation", &options.draft_perturbation,
                  "relative noise added to the draft's copy of the target layers");
  flags.AddString("dtype", &dtype,
                  "storage type of the weights: f32 | bf16 | f16 (default: bf16 for the "
                  "tiny-dsv3 presets, whose FP8 variant stores its projections in FP8, else f32)");
  std::string tokenizer_dir;
  flags.AddPath("tokenizer", &tokenizer_dir,
                "a Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json): the "
                "model takes its vocabulary and special tokens, and the files are copied");
  absl::Status status = flags.Parse(args);
  if (status.ok() && flags.help_requested()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  options.seed = static_cast<uint64_t>(seed);
  if (status.ok()) {
    if (dtype.empty()) {
      options.dtype = engine::PresetDefaultDType(options.preset);
    } else if (dtype == "f32") {
      options.dtype = engine::DType::kF32;
    } else if (dtype == "bf16") {
      options.dtype = engine::DType::kBF16;
    } else if (dtype == "f16") {
      options.dtype = engine::DType::kF16;
    } else {
      status = absl::InvalidArgumentError(
          absl::StrCat("--dtype: '", dtype, "' is not f32, bf16 or f16"));
    }
  }
  if (status.ok() && !tokenizer_dir.empty()) status = UseTokenizer(tokenizer_dir, &options);
  if (status.ok()) status = engine::MakeModel(options);
  if (status.ok() && !tokenizer_dir.empty()) status = CopyTokenizerFiles(tokenizer_dir, options);
  if (!status.ok()) {
    std::fprintf(stderr, "make-model: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  std::printf("wrote %s model to %s%s\n", options.preset.c_str(), options.out_dir.c_str(),
              options.with_draft ? " (draft in draft/)" : "");
  return 0;
}

}  // namespace lockstep::cli

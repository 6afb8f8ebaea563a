#include "tools/cli/make_model_command.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/engine/make_model.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {

int RunMakeModelCommand(const std::vector<std::string>& args) {
  engine::MakeModelOptions options;
  int64_t seed = static_cast<int64_t>(options.seed);
  std::string dtype = "f32";
  FlagSet flags("make-model");
  flags.AddString("preset", &options.preset, "tiny | tiny-moe");
  flags.AddPath("out", &options.out_dir, "output directory (the draft goes to OUT/draft)");
  flags.AddInt("seed", &seed, "seed of the random weights");
  flags.AddDouble("draft-perturbation", &options.draft_perturbation,
                  "relative noise added to the draft's copy of the target layers");
  flags.AddString("dtype", &dtype, "storage type of the weights: f32 | bf16 | f16");
  absl::Status status = flags.Parse(args);
  if (status.ok() && flags.help_requested()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  options.seed = static_cast<uint64_t>(seed);
  if (status.ok()) {
    if (dtype == "f32") {
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
  if (status.ok()) status = engine::MakeModel(options);
  if (!status.ok()) {
    std::fprintf(stderr, "make-model: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  std::printf("wrote %s model to %s%s\n", options.preset.c_str(), options.out_dir.c_str(),
              options.with_draft ? " (draft in draft/)" : "");
  return 0;
}

}  // namespace lockstep::cli

// `lockstep make-model --preset tiny|tiny-moe --out DIR [--seed S]
// [--draft-perturbation X] [--dtype f32|bf16|f16] [--tokenizer DIR]`: see
// runtime/engine/model/make_model.h. With --tokenizer, the random model takes the vocabulary
// size and BOS / EOS ids of a Hugging Face tokenizer directory, whose tokenizer.json,
// tokenizer_config.json (chat template) and generation_config.json are copied into
// the model, so real tokenizers and templates run end to end without real weights.
#ifndef LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

// Returns the exit status (0 on success, 2 on a bad flag or a failed write).
int RunMakeModelCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_

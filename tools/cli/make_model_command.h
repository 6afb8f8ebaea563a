// `lockstep make-model --preset tiny|tiny-moe --out DIR [--seed S]
// [--draft-perturbation X] [--dtype f32|bf16|f16]`: see runtime/engine/make_model.h.
#ifndef LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

// Returns the exit status (0 on success, 2 on a bad flag or a failed write).
int RunMakeModelCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_MAKE_MODEL_COMMAND_H_

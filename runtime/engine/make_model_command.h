// `lockstep make-model --preset tiny|tiny-moe --out DIR [--seed S]
// [--draft-perturbation X] [--dtype f32|bf16|f16]`: see make_model.h.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MAKE_MODEL_COMMAND_H_
#define LOCKSTEP_RUNTIME_ENGINE_MAKE_MODEL_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::engine {

// Returns the exit status (0 on success, 2 on a bad flag or a failed write).
int RunMakeModel(const std::vector<std::string>& args);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MAKE_MODEL_COMMAND_H_

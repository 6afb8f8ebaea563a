#include "runtime/engine/cuda_support.h"

namespace lockstep::engine {

bool BuiltWithCuda() {
#ifdef LOCKSTEP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

absl::Status CudaEngineSupport() {
  if (!BuiltWithCuda()) {
    return absl::FailedPreconditionError(
        "engine cuda: this binary was built without CUDA (build it with "
        "`bazel build --config=cuda`, or use engine cpu)");
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine

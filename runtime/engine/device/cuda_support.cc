#include "runtime/engine/device/cuda_support.h"

#include <cstdlib>
#include <string_view>

namespace lockstep::engine {

bool BuiltWithCuda() {
#ifdef LOCKSTEP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool BuiltWithCudaCpu() {
#ifdef LOCKSTEP_CUDA_CPU
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
  if (BuiltWithCudaCpu()) {
    const char* ok = std::getenv(kCudaCpuOkEnv);
    if (ok == nullptr || std::string_view(ok) != "1") {
      return absl::FailedPreconditionError(
          "engine cuda: this binary runs CUDA on the CPU execution layer (built with "
          "--config=cuda_cpu, for tests, far slower than a GPU): set LOCKSTEP_CUDA_CPU_OK=1 "
          "to run it anyway, build with `bazel build --config=cuda` for a GPU, or use engine "
          "cpu");
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine

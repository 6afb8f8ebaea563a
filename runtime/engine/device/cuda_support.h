// Whether this binary can run `engine: cuda`. A worker asks before it allocates
// anything, so a deployment that names the CUDA engine fails at start with a clear
// error on a binary built without CUDA, not later.
#ifndef LOCKSTEP_RUNTIME_ENGINE_DEVICE_CUDA_SUPPORT_H_
#define LOCKSTEP_RUNTIME_ENGINE_DEVICE_CUDA_SUPPORT_H_

#include "absl/status/status.h"

namespace lockstep::engine {

// True in a binary built with `--config=cuda` or `--config=cuda_cpu`.
bool BuiltWithCuda();

// True in a binary built with `--config=cuda_cpu`: its CUDA code runs on the CPU
// execution layer (runtime/cuda/cpu), a test vehicle, not a way to serve.
bool BuiltWithCudaCpu();

// What lets a `--config=cuda_cpu` binary run engine cuda anyway ("1"; its tests set it).
inline constexpr char kCudaCpuOkEnv[] = "LOCKSTEP_CUDA_CPU_OK";

// OK when this binary can create the CUDA engine (built with CUDA; whether a GPU is
// there shows when the engine starts). Otherwise FailedPrecondition: the message says
// the binary was built without CUDA and how to build one, or that it runs CUDA on the
// CPU execution layer and LOCKSTEP_CUDA_CPU_OK=1 is not set.
absl::Status CudaEngineSupport();

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_DEVICE_CUDA_SUPPORT_H_

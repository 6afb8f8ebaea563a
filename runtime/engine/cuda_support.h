// Whether this binary can run `engine: cuda`. A worker asks before it allocates
// anything, so a deployment that names the CUDA engine fails at start with a clear
// error on a binary built without CUDA, not later.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CUDA_SUPPORT_H_
#define LOCKSTEP_RUNTIME_ENGINE_CUDA_SUPPORT_H_

#include "absl/status/status.h"

namespace lockstep::engine {

// True in a binary built with `--config=cuda`.
bool BuiltWithCuda();

// OK when this binary can create the CUDA engine (built with CUDA; whether a GPU is
// there shows when the engine starts). Otherwise FailedPrecondition: the message says
// the binary was built without CUDA and how to build one.
absl::Status CudaEngineSupport();

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CUDA_SUPPORT_H_

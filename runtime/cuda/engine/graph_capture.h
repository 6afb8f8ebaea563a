// Ending a CUDA graph capture without leaking what a failed one made.
//
// Thread-compatible: the capturing thread's.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_GRAPH_CAPTURE_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_GRAPH_CAPTURE_H_

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda {

using GraphDestroyer = cudaError_t (*)(cudaGraph_t);

// Ends the capture on `stream` (cudaStreamEndCapture). `enqueued` is how the captured
// work's enqueueing went: when it or the end failed, the graph the capture made (if
// any) is destroyed with `destroy` and the error returned; else the graph (owned by the
// caller). `what` names the graph in errors.
absl::StatusOr<cudaGraph_t> EndCapture(cudaStream_t stream, const absl::Status& enqueued,
                                       absl::string_view what,
                                       GraphDestroyer destroy = cudaGraphDestroy);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_GRAPH_CAPTURE_H_

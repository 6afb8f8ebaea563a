// What the parts of the CPU execution layer (kernel launches, cuBLASLt, NCCL) need
// from its CUDA runtime: putting work in a stream's order (or into the graph a stream
// is capturing), the device's sticky and last errors, the allocation registry the
// checks use, and the current device. Implemented by the runtime (`:cudart`).
//
// Thread safety: every function may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_OPS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_OPS_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "driver_types.h"

namespace lockstep::cuda_cpu {

// One unit of stream-ordered work. Runs on the stream's worker thread (or on the
// thread that launches a graph's nodes in order). A result other than cudaSuccess is
// an asynchronous fault: it becomes the device's sticky error (SetStickyError), and
// later work on the device is not run.
using StreamOp = std::function<cudaError_t()>;

// Puts `op` on `stream` (nullptr: the legacy default stream) after everything enqueued
// on it before; while `stream` is capturing, records `op` as the next node of the graph
// being captured instead (it then runs at every launch of the instantiated graph, so
// whatever it reads must be read when it runs, not now). `name` names the work in
// reports, e.g. "kernel DecodeAttentionSplit<Bf16>", "cublasLtMatmul", "ncclSend".
// Returns cudaSuccess, cudaErrorInvalidResourceHandle for a stream that does not
// exist, or the device's sticky error.
cudaError_t Enqueue(cudaStream_t stream, std::string_view name, StreamOp op);

// Whether `stream` is being captured now.
bool IsCapturing(cudaStream_t stream);

// Records an asynchronous fault on the current device: every later runtime call
// returns `error` (as CUDA does after an illegal address). `message` says where
// (kernel, block, thread, address) and is logged to stderr once.
void SetStickyError(cudaError_t error, std::string message);

// Records a synchronous launch error for cudaGetLastError/cudaPeekAtLastError of the
// calling thread (a bad launch configuration is not sticky).
void SetLastError(cudaError_t error);

// A live allocation the runtime made: device memory (cudaMalloc, cudaMallocAsync) or
// pinned host memory (cudaMallocHost, cudaHostAlloc).
struct Allocation {
  const std::byte* base = nullptr;
  size_t bytes = 0;
  bool device = true;  // false: pinned host memory
  int device_ordinal = 0;
};

// The live allocation containing `address` (base <= address < base + bytes), if any.
std::optional<Allocation> FindAllocation(const void* address);

// The calling thread's current device (cudaSetDevice), 0 by default.
int CurrentDevice();

}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_OPS_H_

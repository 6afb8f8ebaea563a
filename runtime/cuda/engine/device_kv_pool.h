// A KV pool in device memory for the checks and benchmarks that drive a
// CudaTransformer directly (the engine's own pools come from the DeviceBlockAllocator):
// `blocks` blocks of `layout`, zero-filled, the fill finished on return. The fill runs
// on the legacy default stream, which the model's non-blocking stream does not wait
// for, so it is synchronized here rather than left to race the first forward.
//
// Move-only; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_KV_POOL_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_KV_POOL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/engine/device_memory.h"
#include "runtime/engine/cpu/paged_attention.h"

namespace lockstep::cuda {

struct DeviceKvPool {
  DeviceBuffer memory;
  engine::KvPoolView view;  // into `memory`
};

// ResourceExhausted (naming the pool's bytes and the free memory) when it does not fit.
absl::StatusOr<DeviceKvPool> MakeDeviceKvPool(int device, const kv::BlockLayout& layout,
                                              int32_t blocks);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_KV_POOL_H_

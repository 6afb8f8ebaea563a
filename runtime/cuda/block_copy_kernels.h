// The block gather/scatter kernel's launchers: raw pointers and a stream, no absl, so
// nvcc alone builds them (the absl::Status side is device_block_copier.h).
//
// Gather copies each segment from `slab + slab_offset` to `staging + staging_offset`;
// scatter copies the other way. `staging` and `segments` may be device memory or mapped
// pinned host memory (the copier uses pinned memory, so one kernel moves the bytes
// between the device slab and the host). Segments must not overlap in their
// destination. Both return the launch's error (cudaSuccess when it was enqueued).
#ifndef LOCKSTEP_RUNTIME_CUDA_BLOCK_COPY_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_BLOCK_COPY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/cuda/copy_segment.h"

namespace lockstep::cuda {

cudaError_t LaunchGatherSegments(const std::byte* slab, std::byte* staging,
                                 const CopySegment* segments, int num_segments,
                                 cudaStream_t stream);

cudaError_t LaunchScatterSegments(std::byte* slab, const std::byte* staging,
                                  const CopySegment* segments, int num_segments,
                                  cudaStream_t stream);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_BLOCK_COPY_KERNELS_H_

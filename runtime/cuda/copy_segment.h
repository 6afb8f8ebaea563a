// One contiguous run of bytes moved between a KV slab and a staging buffer by the block
// copy kernel (block_copy_kernels.h). Plain data, shared by nvcc-compiled and host code.
#ifndef LOCKSTEP_RUNTIME_CUDA_COPY_SEGMENT_H_
#define LOCKSTEP_RUNTIME_CUDA_COPY_SEGMENT_H_

#include <cstdint>

namespace lockstep::cuda {

struct CopySegment {
  uint64_t slab_offset = 0;     // bytes from the slab's start
  uint64_t staging_offset = 0;  // bytes from the staging buffer's start
  uint64_t length = 0;          // > 0
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_COPY_SEGMENT_H_

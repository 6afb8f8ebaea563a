#include "runtime/cuda/block_copy_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;

// Copies `length` bytes with the widest access that all of src, dst and length allow.
template <typename T>
__device__ void CopyWords(const unsigned char* src, unsigned char* dst, uint64_t length) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  const uint64_t words = length / sizeof(T);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
}

// One CTA per segment (grid-stride over segments). kGather: slab -> staging.
template <bool kGather>
__global__ void CopySegmentsKernel(unsigned char* slab, unsigned char* staging,
                                   const CopySegment* segments, int num_segments) {
  for (int i = blockIdx.x; i < num_segments; i += gridDim.x) {
    const CopySegment seg = segments[i];
    unsigned char* slab_ptr = slab + seg.slab_offset;
    unsigned char* staging_ptr = staging + seg.staging_offset;
    const unsigned char* src = kGather ? slab_ptr : staging_ptr;
    unsigned char* dst = kGather ? staging_ptr : slab_ptr;
    const uint64_t bits =
        reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | seg.length;
    if (bits % 16 == 0) {
      CopyWords<uint4>(src, dst, seg.length);
    } else if (bits % 4 == 0) {
      CopyWords<uint32_t>(src, dst, seg.length);
    } else {
      CopyWords<unsigned char>(src, dst, seg.length);
    }
  }
}

int GridFor(int num_segments) { return num_segments < kMaxGrid ? num_segments : kMaxGrid; }

}  // namespace

cudaError_t LaunchGatherSegments(const std::byte* slab, std::byte* staging,
                                 const CopySegment* segments, int num_segments,
                                 cudaStream_t stream) {
  if (num_segments <= 0) return cudaSuccess;
  // The kernel only reads the slab when gathering.
  LOCKSTEP_LAUNCH(CopySegmentsKernel<true>, GridFor(num_segments), kThreads, 0, stream)
  (const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(slab)),
   reinterpret_cast<unsigned char*>(staging), segments, num_segments);
  return cudaGetLastError();
}

cudaError_t LaunchScatterSegments(std::byte* slab, const std::byte* staging,
                                  const CopySegment* segments, int num_segments,
                                  cudaStream_t stream) {
  if (num_segments <= 0) return cudaSuccess;
  // The kernel only reads the staging buffer when scattering.
  LOCKSTEP_LAUNCH(CopySegmentsKernel<false>, GridFor(num_segments), kThreads, 0, stream)
  (reinterpret_cast<unsigned char*>(slab),
   const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(staging)), segments,
   num_segments);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda

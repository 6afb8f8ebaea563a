// Device helpers shared by the kernels of this package (device code: included by .cu files only).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_DEVICE_UTIL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_DEVICE_UTIL_H_

#include <cuda_bf16.h>

#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

__device__ __forceinline__ float LoadBf16(const Bf16* p) {
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
}

__device__ __forceinline__ void StoreBf16(Bf16* p, float v) {
  *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the CTA (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_DEVICE_UTIL_H_

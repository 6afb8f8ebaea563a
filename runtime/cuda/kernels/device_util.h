// Device helpers shared by the kernels of this package (device code: included by .cu files only).
// Kernels store bf16 (Bf16) or f32 (float) elements; the f32 instantiations serve the
// engine's `cuda.dtype: f32` mode, which separates indexing bugs from bf16 rounding.
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

// Element access of the kernels that take bf16 or f32 storage (f32 math either way):
// Load widens, Store rounds to the element type (nearest even for bf16), Round gives
// the value as it would be stored.
__device__ __forceinline__ float Load(const Bf16* p) { return LoadBf16(p); }
__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ void Store(Bf16* p, float v) { StoreBf16(p, v); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
template <typename T>
__device__ __forceinline__ float Round(float v);
template <>
__device__ __forceinline__ float Round<Bf16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}
template <>
__device__ __forceinline__ float Round<float>(float v) {
  return v;
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

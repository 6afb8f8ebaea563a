// <cuda_runtime.h> of the CPU execution layer: the runtime API (cuda_runtime_api.h),
// the vector types and their make_* functions, and the C++ conveniences CUDA's header
// adds (typed-pointer overloads of the allocation calls).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_H_

#include "cuda_runtime_api.h"
#include "driver_types.h"
#include "vector_functions.h"
#include "vector_types.h"

template <class T>
cudaError_t cudaMalloc(T** devPtr, size_t size) {
  return ::cudaMalloc(reinterpret_cast<void**>(devPtr), size);
}

template <class T>
cudaError_t cudaMallocAsync(T** devPtr, size_t size, cudaStream_t stream) {
  return ::cudaMallocAsync(reinterpret_cast<void**>(devPtr), size, stream);
}

template <class T>
cudaError_t cudaMallocHost(T** ptr, size_t size, unsigned int flags = 0) {
  return flags == 0 ? ::cudaMallocHost(reinterpret_cast<void**>(ptr), size)
                    : ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}

template <class T>
cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}

template <class T>
cudaError_t cudaHostGetDevicePointer(T** pDevice, void* pHost, unsigned int flags) {
  return ::cudaHostGetDevicePointer(reinterpret_cast<void**>(pDevice), pHost, flags);
}

inline cudaError_t cudaEventCreate(cudaEvent_t* event, unsigned int flags) {
  return ::cudaEventCreateWithFlags(event, flags);
}

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_H_

// The CUDA runtime API subset Lockstep's host code calls, with CUDA 13.0's names,
// signatures and defaults, implemented on the host by the CPU execution layer
// (`//runtime/cuda/cpu:cudart`). Every function may be called from any thread; the
// current device and the last error are per thread, a sticky (asynchronous) error is
// per device and every later call on that device returns it.
//
// How it differs from a GPU:
// * Each stream is a FIFO run in order by its own worker thread; the legacy default
//   stream (nullptr, cudaStreamLegacy; cudaStreamPerThread is the same stream here)
//   waits for earlier work of the device's blocking streams and they for its.
// * Copies: cudaMemcpy is synchronous; cudaMemcpyAsync from pinned or device memory
//   reads the source when the stream gets there, from pageable memory at the call,
//   and to pageable memory returns once done; cudaMemset is asynchronous. A device
//   side range must lie inside one live allocation (cudaErrorInvalidValue).
// * Memory (memory.h): guard page after each allocation, 0xFF poison, quarantine;
//   LOCKSTEP_CUDA_CPU_MEMORY bytes per device (default 2 GiB), LOCKSTEP_CUDA_CPU_DEVICES
//   devices (default 8). Mapped pinned memory is its own device pointer.
// * Capture records work as graph nodes run in capture order. What CUDA forbids during
//   a capture fails and invalidates it: synchronising or querying the capturing
//   stream, querying a captured event, legacy-stream work while a blocking stream
//   captures (cudaErrorStreamCaptureImplicit), unsafe calls (allocation, synchronous
//   copies and fills, frees) under a global or this thread's thread-local capture,
//   cudaDeviceSynchronize. cudaMallocAsync/cudaFreeAsync in a capture (graph memory
//   nodes) are refused with cudaErrorStreamCaptureUnsupported.
// * Faults for tests: faults.h (LOCKSTEP_CUDA_CPU_FAULTS).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_API_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_API_H_

#include <cstddef>

#include "driver_types.h"
#include "vector_types.h"

#define CUDART_VERSION 13000

// Errors.
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

// Devices and versions.
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDriverGetVersion(int* driverVersion);
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);

// Device and pinned host memory.
cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

// Copies and fills.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = 0);
cudaError_t cudaMemset(void* devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream = 0);

// Streams.
cudaError_t cudaStreamCreate(cudaStream_t* pStream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData);

// Events.
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Stream capture and graphs.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_RUNTIME_API_H_

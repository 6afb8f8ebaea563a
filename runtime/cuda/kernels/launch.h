// The one way a .cu file launches a kernel or declares dynamic shared memory, so that
// the same source builds with nvcc for a GPU and as C++ on the CPU execution layer
// (--config=cuda_cpu, runtime/cuda/cpu; docs/gpu.md).
//
//   LOCKSTEP_LAUNCH(Kernel<T>, grid, block, shared_bytes, stream)(args...);
//   LOCKSTEP_EXTERN_SHARED(float, smem);  // in a kernel: dynamic shared memory
//
// Under nvcc (__CUDACC__) they are exactly `Kernel<T><<<grid, block, shared_bytes,
// stream>>>(args...)` and `extern __shared__ float smem[]`: the GPU code does not change
// (docs/gpu.md shows the PTX and cubin of every .cu byte for byte). Otherwise the kernel
// prelude of the CPU execution layer (runtime/cuda/cpu/kernel, included first into each
// .cu there) provides `::lockstep::cuda_cpu::Launch`, which validates the configuration
// as the driver does (a bad one is cudaGetLastError's, not sticky) and puts the grid on
// the stream, and `::lockstep::cuda_cpu::DynamicShared<T>()`, the calling block's
// dynamic shared memory.
//
// The kernel expression names no template argument list with a comma (wrap such a
// kernel in an alias first): it is one macro argument.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_LAUNCH_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_LAUNCH_H_

#ifdef __CUDACC__

#define LOCKSTEP_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  kernel<<<grid, block, shared_bytes, stream>>>

#define LOCKSTEP_EXTERN_SHARED(type, name) extern __shared__ type name[]

#else  // the CPU execution layer

#define LOCKSTEP_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  ::lockstep::cuda_cpu::Launch(kernel, #kernel, grid, block, shared_bytes, stream)

#define LOCKSTEP_EXTERN_SHARED(type, name) \
  type* const name = ::lockstep::cuda_cpu::DynamicShared<type>()

#endif  // __CUDACC__

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_LAUNCH_H_

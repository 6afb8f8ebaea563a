// The kernel prelude of the CPU execution layer: included first into every .cu file
// compiled as C++ (--config=cuda_cpu; bazel/cuda.bzl's CUDA_CPU_PRELUDE), and into the
// layer's own test kernels. It gives CUDA's device dialect a host meaning:
// * `__global__`, `__device__`, `__host__`, `__launch_bounds__(...)`: nothing;
//   `__forceinline__`: always_inline; `__restrict__` is the compiler's own.
// * `threadIdx`, `blockIdx`, `blockDim`, `gridDim`: the running kernel thread's
//   (block_executor.h); `warpSize`: 32.
// * `__shared__`: `static thread_local`, one object per OS thread running a block (a
//   block's threads are fibers of one OS thread, which runs one block at a time), so
//   exactly per block; not poisoned between blocks. Dynamic shared memory:
//   LOCKSTEP_EXTERN_SHARED of runtime/cuda/kernels/launch.h, which calls
//   ::lockstep::cuda_cpu::DynamicShared<T>() (launch.h here; 0xFF-poisoned per block).
// * Device `assert`: a failed one ends the grid with cudaErrorAssert (sticky), naming
//   the thread (nothing under NDEBUG, as on the device). A header that includes
//   <assert.h> after this one puts back the host's assert.
// * `fmaf`: kernel::Fma (fma.h), the same bits as the C library's fmaf, inline where
//   the CPU has FMA3 (a function-like macro: `std::fmaf` is not available in kernels).
// * The builtins of device_builtins.h, bf16 of <cuda_bf16.h>, the vector types, and
//   the launch template of launch.h.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_PRELUDE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_PRELUDE_H_

#include <cuda_bf16.h>
#include <math.h>

#include <cassert>
#include <cmath>  // before the fmaf macro below: libstdc++'s <cmath> #undefs fmaf
#include <string>

#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "runtime/cuda/cpu/kernel/device_builtins.h"
#include "runtime/cuda/cpu/kernel/fma.h"
#include "runtime/cuda/cpu/kernel/launch.h"
#include "vector_types.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static thread_local

#define threadIdx (::lockstep::cuda_cpu::kernel::tls_coords->thread_idx)
#define blockIdx (::lockstep::cuda_cpu::kernel::tls_coords->block_idx)
#define blockDim (::lockstep::cuda_cpu::kernel::tls_coords->block_dim)
#define gridDim (::lockstep::cuda_cpu::kernel::tls_coords->grid_dim)
#define warpSize 32
#define fmaf(a, b, c) ::lockstep::cuda_cpu::kernel::Fma((a), (b), (c))

namespace lockstep::cuda_cpu::kernel {

[[noreturn]] inline void AssertFail(const char* expression, const char* file, int line) {
  FailKernel(cudaErrorAssert, std::string("device assert `") + expression + "` failed", file, line);
}

}  // namespace lockstep::cuda_cpu::kernel

#undef assert
#ifdef NDEBUG
#define assert(expression) ((void)0)
#else
#define assert(expression) \
  ((expression) ? (void)0  \
                : ::lockstep::cuda_cpu::kernel::AssertFail(#expression, __FILE__, __LINE__))
#endif

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_PRELUDE_H_

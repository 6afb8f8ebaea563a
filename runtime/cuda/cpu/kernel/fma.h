// The fused multiply-add of kernels on the CPU execution layer: `fmaf` in a .cu file
// compiled as C++ means Fma (prelude.h). The result is the correctly rounded a * b + c,
// as CUDA's fmaf and the C library's; on an x86-64 CPU with FMA3 (and an OS that saves
// its registers) it is one inline instruction instead of a call into the C library,
// whose cost dominated the GEMM-like kernels' inner loops (docs/perf/build_config.md).
//
// Thread safety: CpuHasFma is fixed before main and read-only after.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FMA_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FMA_H_

#include <math.h>

namespace lockstep::cuda_cpu::kernel {

// Whether this CPU and OS run FMA3 instructions (CPUID and XGETBV, read at start-up).
extern const bool kCpuHasFma;

// fmaf(a, b, c): the same bits as the C library's, inline where the CPU allows.
inline __attribute__((always_inline)) float Fma(float a, float b, float c) {
#if defined(__x86_64__) && !defined(__FMA__)
  if (__builtin_expect(kCpuHasFma, true)) {
    // AT&T operand order: c = a * b + c, rounded once.
    asm("vfmadd231ss %2, %1, %0" : "+x"(c) : "x"(a), "x"(b));
    return c;
  }
#endif
  return ::fmaf(a, b, c);
}

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FMA_H_

#include "runtime/cuda/cpu/kernel/fma.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace lockstep::cuda_cpu::kernel {
namespace {

bool DetectFma() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kFma = 1u << 12, kOsXsave = 1u << 27, kAvx = 1u << 28;
  if ((ecx & (kFma | kOsXsave | kAvx)) != (kFma | kOsXsave | kAvx)) return false;
  // The OS saves the SSE and AVX register state (XCR0 bits 1 and 2).
  unsigned xcr0_low = 0, xcr0_high = 0;
  asm volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  return (xcr0_low & 6u) == 6u;
#else
  return false;
#endif
}

}  // namespace

const bool kCpuHasFma = DetectFma();

}  // namespace lockstep::cuda_cpu::kernel

#include "runtime/cuda/kernels/gemm_key.h"

namespace lockstep::cuda::kernels {

int64_t GemmMBucket(int64_t m) {
  if (m > kMaxGemmMBucket) return (m + kMaxGemmMBucket - 1) / kMaxGemmMBucket * kMaxGemmMBucket;
  int64_t bucket = 1;
  while (bucket < m) bucket *= 2;
  return bucket;
}

uint32_t AddressAlignment(uintptr_t address) {
  uint32_t alignment = 1;
  while (alignment < kMaxGemmAlignment && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

GemmAlignments AlignmentsOf(const void* w, const void* x, const void* y) {
  return {.a = AddressAlignment(w), .b = AddressAlignment(x), .d = AddressAlignment(y)};
}

GemmKey MakeGemmKey(int64_t m, int64_t n, int64_t k, bool batch_invariant, GemmAlignments align,
                    const GemmBatch& batch) {
  return {.m_bucket = batch_invariant ? 0 : GemmMBucket(m),
          .n = n,
          .k = k,
          .align = align,
          .batch = batch};
}

}  // namespace lockstep::cuda::kernels

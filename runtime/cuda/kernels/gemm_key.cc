#include "runtime/cuda/kernels/gemm_key.h"

namespace lockstep::cuda::kernels {

int64_t GemmMBucket(int64_t m) {
  if (m > kMaxGemmMBucket) return (m + kMaxGemmMBucket - 1) / kMaxGemmMBucket * kMaxGemmMBucket;
  int64_t bucket = 1;
  while (bucket < m) bucket *= 2;
  return bucket;
}

GemmKey MakeGemmKey(int64_t m, int64_t n, int64_t k, bool batch_invariant) {
  return {.m_bucket = batch_invariant ? 0 : GemmMBucket(m), .n = n, .k = k};
}

}  // namespace lockstep::cuda::kernels

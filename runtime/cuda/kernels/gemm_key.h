// The algorithm-cache key of the cuBLASLt GEMM wrapper: (M bucket, N, K). M is rounded
// up to a power of two (a few buckets cover every batch size); in batch-invariant mode
// the bucket is 0 for every M, so one algorithm serves every batch size and a row's
// result does not depend on how many rows share its GEMM.
//
// Pure host code.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_KEY_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_KEY_H_

#include <cstdint>
#include <utility>

namespace lockstep::cuda::kernels {

// The smallest power of two >= m (m >= 1), capped at kMaxGemmMBucket; larger m round
// up to a multiple of kMaxGemmMBucket.
inline constexpr int64_t kMaxGemmMBucket = 8192;
int64_t GemmMBucket(int64_t m);

struct GemmKey {
  int64_t m_bucket = 0;  // 0: batch-invariant (every M)
  int64_t n = 0;
  int64_t k = 0;

  friend bool operator==(const GemmKey&, const GemmKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& key) {
    return H::combine(std::move(h), key.m_bucket, key.n, key.k);
  }
};

GemmKey MakeGemmKey(int64_t m, int64_t n, int64_t k, bool batch_invariant);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_KEY_H_

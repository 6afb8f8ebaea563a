// The algorithm-cache key of the cuBLASLt GEMM wrapper: (M bucket, N, K, the operands'
// alignments). M is rounded up to a power of two (a few buckets cover every batch
// size); in batch-invariant mode the bucket is 0 for every M, so one algorithm serves
// every batch size and a row's result does not depend on how many rows share its GEMM.
// The alignments are part of the key because cuBLASLt picks algorithms for them: one
// chosen for 256-byte aligned pointers (its default assumption) may not run on the
// offset pointers of a per-expert GEMM (rows [offsets[e], ...) of a permuted buffer).
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

// The alignment cuBLASLt assumes unless told (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
inline constexpr uint32_t kMaxGemmAlignment = 256;

// The largest power of two dividing `address`, at most kMaxGemmAlignment (the null
// address counts as fully aligned).
uint32_t AddressAlignment(uintptr_t address);
inline uint32_t AddressAlignment(const void* p) {
  return AddressAlignment(reinterpret_cast<uintptr_t>(p));
}

// The byte alignments of one call's operands in cuBLASLt's column-major terms: A is the
// weight w, B the input x, C and D the output y.
struct GemmAlignments {
  uint32_t a = kMaxGemmAlignment;
  uint32_t b = kMaxGemmAlignment;
  uint32_t d = kMaxGemmAlignment;

  friend bool operator==(const GemmAlignments&, const GemmAlignments&) = default;
};

// The alignments of w, x and y.
GemmAlignments AlignmentsOf(const void* w, const void* x, const void* y);

struct GemmKey {
  int64_t m_bucket = 0;  // 0: batch-invariant (every M)
  int64_t n = 0;
  int64_t k = 0;
  GemmAlignments align;

  friend bool operator==(const GemmKey&, const GemmKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& key) {
    return H::combine(std::move(h), key.m_bucket, key.n, key.k, key.align.a, key.align.b,
                      key.align.d);
  }
};

GemmKey MakeGemmKey(int64_t m, int64_t n, int64_t k, bool batch_invariant,
                    GemmAlignments align = {});

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_KEY_H_

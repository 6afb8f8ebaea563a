// The algorithm-cache key of the cuBLASLt GEMM wrapper: (M bucket, N, K, the operands'
// alignments, their layout: dense or a strided batch). M is rounded up to a power of two (a few
// buckets cover every batch size); in batch-invariant mode the bucket is 0 for every M, so one
// algorithm serves every batch size and a row's result does not depend on how many rows share its
// GEMM. The alignments are part of the key because cuBLASLt picks algorithms for them: one chosen
// for 256-byte aligned pointers (its default assumption) may not run on the offset pointers of a
// per-expert GEMM (rows [offsets[e], ...) of a permuted buffer).
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

// Where a GEMM's operands lie, in elements: `count` products (a strided batch, e.g. one
// per attention head), product b reading x + b * x_stride (rows x_ld apart) and
// w + b * w_stride (rows w_ld apart: [n, k] row-major when w_transposed, the linear-layer
// layout; else [k, n]) and writing y + b * y_stride (rows y_ld apart). An ld of 0 means
// dense rows (k, k or n, n). The default is one dense product.
struct GemmBatch {
  int64_t count = 1;
  int64_t x_ld = 0, x_stride = 0;
  int64_t w_ld = 0, w_stride = 0;
  int64_t y_ld = 0, y_stride = 0;
  bool w_transposed = true;

  friend bool operator==(const GemmBatch&, const GemmBatch&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GemmBatch& b) {
    return H::combine(std::move(h), b.count, b.x_ld, b.x_stride, b.w_ld, b.w_stride, b.y_ld,
                      b.y_stride, b.w_transposed);
  }
};

struct GemmKey {
  int64_t m_bucket = 0;  // 0: batch-invariant (every M)
  int64_t n = 0;
  int64_t k = 0;
  GemmAlignments align;
  GemmBatch batch;

  friend bool operator==(const GemmKey&, const GemmKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& key) {
    return H::combine(std::move(h), key.m_bucket, key.n, key.k, key.align.a, key.align.b,
                      key.align.d, key.batch);
  }
};

GemmKey MakeGemmKey(int64_t m, int64_t n, int64_t k, bool batch_invariant,
                    GemmAlignments align = {}, const GemmBatch& batch = {});

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_GEMM_KEY_H_

#include "runtime/cuda/cpu/cublaslt_product.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/cuda/kernels/bf16.h"

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
#define LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH 1
#endif

namespace lockstep::cuda_cpu {
namespace {

using ::lockstep::cuda::kernels::Bf16;
using ::lockstep::cuda::kernels::Bf16ToFloat;
using ::lockstep::cuda::kernels::FloatToBf16;

// Register tile (rows of op(A) x columns of op(B)), k block and row block: a packed
// kKc x kMc block of op(A) stays in L2, a kKc x kNr panel of op(B) in L1.
constexpr int kMr = 16;
constexpr int kNr = 6;
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 128;

float Load(const void* data, ElementType type, int64_t index) {
  if (type == ElementType::kF32) return static_cast<const float*>(data)[index];
  return Bf16ToFloat(static_cast<const Bf16*>(data)[index]);
}

inline float Widen(float v) { return v; }
inline float Widen(Bf16 v) { return Bf16ToFloat(v); }

// Packs op(A)[i0 .. i0 + kMr, p0 .. p0 + kc] as kc rows of kMr floats (zero past row m).
// One instance per element type and transposition, so the copy loops are plain.
template <typename T, bool kTransposed>
void PackA(const MatrixOperand& a, int64_t m, int64_t i0, int64_t p0, int64_t kc, float* out) {
  const T* base = static_cast<const T*>(a.data);
  const int rows = static_cast<int>(std::min<int64_t>(kMr, m - i0));
  if (rows < kMr) std::fill(out, out + kc * kMr, 0.0f);
  if constexpr (kTransposed) {  // row i of op(A) is contiguous
    for (int ii = 0; ii < rows; ++ii) {
      const T* row = base + (i0 + ii) * a.ld + p0;
      for (int64_t p = 0; p < kc; ++p) out[p * kMr + ii] = Widen(row[p]);
    }
  } else {  // column p of op(A) is contiguous
    for (int64_t p = 0; p < kc; ++p) {
      const T* col = base + (p0 + p) * a.ld + i0;
      for (int ii = 0; ii < rows; ++ii) out[p * kMr + ii] = Widen(col[ii]);
    }
  }
}

// Packs op(B)[p0 .. p0 + kc, j0 .. j0 + kNr] as kc rows of kNr floats (zero past column n).
template <typename T, bool kTransposed>
void PackB(const MatrixOperand& b, int64_t n, int64_t j0, int64_t p0, int64_t kc, float* out) {
  const T* base = static_cast<const T*>(b.data);
  const int cols = static_cast<int>(std::min<int64_t>(kNr, n - j0));
  if (cols < kNr) std::fill(out, out + kc * kNr, 0.0f);
  if constexpr (kTransposed) {  // row p of op(B) is contiguous
    for (int64_t p = 0; p < kc; ++p) {
      const T* row = base + (p0 + p) * b.ld + j0;
      for (int jj = 0; jj < cols; ++jj) out[p * kNr + jj] = Widen(row[jj]);
    }
  } else {  // column j of op(B) is contiguous
    for (int jj = 0; jj < cols; ++jj) {
      const T* col = base + (j0 + jj) * b.ld + p0;
      for (int64_t p = 0; p < kc; ++p) out[p * kNr + jj] = Widen(col[p]);
    }
  }
}

using Packer = void (*)(const MatrixOperand& x, int64_t extent, int64_t start, int64_t p0,
                        int64_t kc, float* out);

template <bool kIsA>
Packer PackerFor(const MatrixOperand& x) {
  const bool bf16 = x.type == ElementType::kBf16;
  if constexpr (kIsA) {
    if (bf16) return x.transposed ? PackA<Bf16, true> : PackA<Bf16, false>;
    return x.transposed ? PackA<float, true> : PackA<float, false>;
  } else {
    if (bf16) return x.transposed ? PackB<Bf16, true> : PackB<Bf16, false>;
    return x.transposed ? PackB<float, true> : PackB<float, false>;
  }
}

// tile[jj * kMr + ii] = fma(ap[p * kMr + ii], bp[p * kNr + jj], tile[...]) for p in order.
using MicroKernel = void (*)(const float* ap, const float* bp, int64_t kc, float* tile);

void MicroKernelScalar(const float* ap, const float* bp, int64_t kc, float* tile) {
  for (int64_t p = 0; p < kc; ++p) {
    for (int jj = 0; jj < kNr; ++jj) {
      const float b = bp[p * kNr + jj];
      for (int ii = 0; ii < kMr; ++ii) {
        tile[jj * kMr + ii] = std::fma(ap[p * kMr + ii], b, tile[jj * kMr + ii]);
      }
    }
  }
}

#ifdef LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH
// The same chains, eight lanes per instruction (vfmadd rounds once, as std::fma).
__attribute__((target("avx2,fma"))) void MicroKernelAvx2(const float* ap, const float* bp,
                                                         int64_t kc, float* tile) {
  __m256 c00 = _mm256_loadu_ps(tile + 0 * kMr), c01 = _mm256_loadu_ps(tile + 0 * kMr + 8);
  __m256 c10 = _mm256_loadu_ps(tile + 1 * kMr), c11 = _mm256_loadu_ps(tile + 1 * kMr + 8);
  __m256 c20 = _mm256_loadu_ps(tile + 2 * kMr), c21 = _mm256_loadu_ps(tile + 2 * kMr + 8);
  __m256 c30 = _mm256_loadu_ps(tile + 3 * kMr), c31 = _mm256_loadu_ps(tile + 3 * kMr + 8);
  __m256 c40 = _mm256_loadu_ps(tile + 4 * kMr), c41 = _mm256_loadu_ps(tile + 4 * kMr + 8);
  __m256 c50 = _mm256_loadu_ps(tile + 5 * kMr), c51 = _mm256_loadu_ps(tile + 5 * kMr + 8);
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 a0 = _mm256_loadu_ps(ap + p * kMr);
    const __m256 a1 = _mm256_loadu_ps(ap + p * kMr + 8);
    const float* b = bp + p * kNr;
    __m256 bb = _mm256_broadcast_ss(b + 0);
    c00 = _mm256_fmadd_ps(a0, bb, c00);
    c01 = _mm256_fmadd_ps(a1, bb, c01);
    bb = _mm256_broadcast_ss(b + 1);
    c10 = _mm256_fmadd_ps(a0, bb, c10);
    c11 = _mm256_fmadd_ps(a1, bb, c11);
    bb = _mm256_broadcast_ss(b + 2);
    c20 = _mm256_fmadd_ps(a0, bb, c20);
    c21 = _mm256_fmadd_ps(a1, bb, c21);
    bb = _mm256_broadcast_ss(b + 3);
    c30 = _mm256_fmadd_ps(a0, bb, c30);
    c31 = _mm256_fmadd_ps(a1, bb, c31);
    bb = _mm256_broadcast_ss(b + 4);
    c40 = _mm256_fmadd_ps(a0, bb, c40);
    c41 = _mm256_fmadd_ps(a1, bb, c41);
    bb = _mm256_broadcast_ss(b + 5);
    c50 = _mm256_fmadd_ps(a0, bb, c50);
    c51 = _mm256_fmadd_ps(a1, bb, c51);
  }
  _mm256_storeu_ps(tile + 0 * kMr, c00), _mm256_storeu_ps(tile + 0 * kMr + 8, c01);
  _mm256_storeu_ps(tile + 1 * kMr, c10), _mm256_storeu_ps(tile + 1 * kMr + 8, c11);
  _mm256_storeu_ps(tile + 2 * kMr, c20), _mm256_storeu_ps(tile + 2 * kMr + 8, c21);
  _mm256_storeu_ps(tile + 3 * kMr, c30), _mm256_storeu_ps(tile + 3 * kMr + 8, c31);
  _mm256_storeu_ps(tile + 4 * kMr, c40), _mm256_storeu_ps(tile + 4 * kMr + 8, c41);
  _mm256_storeu_ps(tile + 5 * kMr, c50), _mm256_storeu_ps(tile + 5 * kMr + 8, c51);
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

// The blocked loops: each output's chain visits p in order (k blocks ascend, and the
// accumulator is stored and reloaded exactly between them).
void Blocked(const MatrixOperand& a, const MatrixOperand& b, int64_t m, int64_t n, int64_t k0,
             int64_t k1, float* acc, MicroKernel kernel) {
  if (m <= 0 || n <= 0 || k1 <= k0) return;
  const int64_t j_panels = (n + kNr - 1) / kNr;
  std::vector<float> bpack(static_cast<size_t>(j_panels) * kNr * kKc);
  std::vector<float> apack(static_cast<size_t>(kMc) * kKc);
  const Packer pack_a = PackerFor<true>(a);
  const Packer pack_b = PackerFor<false>(b);
  float tile[kMr * kNr];
  for (int64_t p0 = k0; p0 < k1; p0 += kKc) {
    const int64_t kc = std::min(kKc, k1 - p0);
    for (int64_t jp = 0; jp < j_panels; ++jp) {
      pack_b(b, n, jp * kNr, p0, kc, bpack.data() + jp * kNr * kc);
    }
    for (int64_t ib = 0; ib < m; ib += kMc) {
      const int64_t i_panels = (std::min(kMc, m - ib) + kMr - 1) / kMr;
      for (int64_t ip = 0; ip < i_panels; ++ip) {
        pack_a(a, m, ib + ip * kMr, p0, kc, apack.data() + ip * kMr * kc);
      }
      for (int64_t jp = 0; jp < j_panels; ++jp) {
        const int64_t j0 = jp * kNr;
        const int cols = static_cast<int>(std::min<int64_t>(kNr, n - j0));
        for (int64_t ip = 0; ip < i_panels; ++ip) {
          const int64_t i0 = ib + ip * kMr;
          const int rows = static_cast<int>(std::min<int64_t>(kMr, m - i0));
          std::fill(std::begin(tile), std::end(tile), 0.0f);
          for (int jj = 0; jj < cols; ++jj) {
            std::memcpy(tile + jj * kMr, acc + i0 + (j0 + jj) * m, rows * sizeof(float));
          }
          kernel(apack.data() + ip * kMr * kc, bpack.data() + jp * kNr * kc, kc, tile);
          for (int jj = 0; jj < cols; ++jj) {
            std::memcpy(acc + i0 + (j0 + jj) * m, tile + jj * kMr, rows * sizeof(float));
          }
        }
      }
    }
  }
}

}  // namespace

bool ProductUsesAvx2() {
#ifdef LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH
  return CpuHasAvx2();
#else
  return false;
#endif
}

void AccumulateProduct(const MatrixOperand& a, const MatrixOperand& b, int64_t m, int64_t n,
                       int64_t k0, int64_t k1, float* acc) {
#ifdef LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH
  if (CpuHasAvx2()) return Blocked(a, b, m, n, k0, k1, acc, MicroKernelAvx2);
#endif
  Blocked(a, b, m, n, k0, k1, acc, MicroKernelScalar);
}

void AccumulateProductScalar(const MatrixOperand& a, const MatrixOperand& b, int64_t m, int64_t n,
                             int64_t k0, int64_t k1, float* acc) {
  Blocked(a, b, m, n, k0, k1, acc, MicroKernelScalar);
}

void WriteOutput(const float* partials, int partial_count, int64_t partial_stride, int64_t m,
                 int64_t n, float alpha, float beta, const MatrixOperand& c,
                 const OutputMatrix& d) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t at = i + j * m;
      float sum = partials[at];
      for (int t = 1; t < partial_count; ++t) sum += partials[t * partial_stride + at];
      float value = alpha * sum;
      if (beta != 0.0f) value = std::fma(beta, Load(c.data, c.type, i + j * c.ld), value);
      const int64_t out = i + j * d.ld;
      if (d.type == ElementType::kF32) {
        static_cast<float*>(d.data)[out] = value;
      } else {
        static_cast<Bf16*>(d.data)[out] = FloatToBf16(value);
      }
    }
  }
}

}  // namespace lockstep::cuda_cpu

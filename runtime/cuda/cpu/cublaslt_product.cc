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

#ifdef LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH
#define LOCKSTEP_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

// Eight consecutive elements, widened exactly.
LOCKSTEP_AVX2 __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
LOCKSTEP_AVX2 __m256 Load8(const Bf16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// r[j] becomes column j of the 8 x 8 matrix whose rows were r[0..7].
LOCKSTEP_AVX2 void Transpose8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// PackA<T, true> with 8 x 8 register transposes (the wrapper's weights: rows of op(A)
// contiguous); the same floats in the same places.
template <typename T>
__attribute__((target("avx2,fma"))) void PackATransposedAvx2(const MatrixOperand& a, int64_t m,
                                                             int64_t i0, int64_t p0, int64_t kc,
                                                             float* out) {
  if (m - i0 < kMr) return PackA<T, true>(a, m, i0, p0, kc, out);
  const T* base = static_cast<const T*>(a.data) + i0 * a.ld + p0;
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int half = 0; half < kMr; half += 8) {
      __m256 r[8];
      for (int ii = 0; ii < 8; ++ii) r[ii] = Load8(base + (half + ii) * a.ld + p);
      Transpose8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (p + j) * kMr + half, r[j]);
    }
  }
  for (; p < kc; ++p) {
    for (int ii = 0; ii < kMr; ++ii) out[p * kMr + ii] = Widen(base[ii * a.ld + p]);
  }
}
#undef LOCKSTEP_AVX2
#endif

using Packer = void (*)(const MatrixOperand& x, int64_t extent, int64_t start, int64_t p0,
                        int64_t kc, float* out);

template <bool kIsA>
Packer PackerFor(const MatrixOperand& x) {
  const bool bf16 = x.type == ElementType::kBf16;
  if constexpr (kIsA) {
#ifdef LOCKSTEP_CUDA_CPU_HAVE_AVX2_PATH
    if (x.transposed && CpuHasAvx2()) {
      return bf16 ? PackATransposedAvx2<Bf16> : PackATransposedAvx2<float>;
    }
#endif
    if (bf16) return x.transposed ? PackA<Bf16, true> : PackA<Bf16, false>;
    return x.transposed ? PackA<float, true> : PackA<float, false>;
  } else {
    if (bf16) return x.transposed ? PackB<Bf16, true> : PackB<Bf16, false>;
    return x.transposed ? PackB<float, true> : PackB<float, false>;
  }
}

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

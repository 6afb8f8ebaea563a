#include "runtime/engine/cpu/gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

constexpr int kPanel = PackedMatrix::kPanel;
constexpr int kRows = 6;  // rows per micro-tile

// Stores `rows` x kPanel accumulators into y, keeping only the first `cols` columns.
inline void StoreTile(const float* acc, int rows, float* y, int ldy, int cols) {
  for (int r = 0; r < rows; ++r) {
    std::memcpy(y + static_cast<size_t>(r) * ldy, acc + r * kPanel, cols * sizeof(float));
  }
}

// Portable reference: the same FMA chain per element, one element at a time.
template <int R>
void TilePortable(const float* x, int ldx, const float* panel, int k, float* y, int ldy, int cols) {
  float acc[R * kPanel] = {};
  for (int kk = 0; kk < k; ++kk) {
    const float* w = panel + static_cast<size_t>(kk) * kPanel;
    for (int r = 0; r < R; ++r) {
      const float xv = x[static_cast<size_t>(r) * ldx + kk];
      for (int j = 0; j < kPanel; ++j)
        acc[r * kPanel + j] = std::fma(xv, w[j], acc[r * kPanel + j]);
    }
  }
  StoreTile(acc, R, y, ldy, cols);
}

#if defined(__x86_64__)
// `R` rows x 16 columns; the accumulators stay in registers (loops fully unrolled).
template <int R>
__attribute__((target("avx2,fma"))) void TileAvx2(const float* x, int ldx, const float* panel,
                                                  int k, float* y, int ldy, int cols) {
  __m256 lo[R];
  __m256 hi[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    lo[r] = _mm256_setzero_ps();
    hi[r] = _mm256_setzero_ps();
  }
  for (int kk = 0; kk < k; ++kk) {
    const float* w = panel + static_cast<size_t>(kk) * kPanel;
    const __m256 w0 = _mm256_loadu_ps(w);
    const __m256 w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + static_cast<size_t>(r) * ldx + kk);
      lo[r] = _mm256_fmadd_ps(xv, w0, lo[r]);
      hi[r] = _mm256_fmadd_ps(xv, w1, hi[r]);
    }
  }
  if (cols == kPanel) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(y + static_cast<size_t>(r) * ldy, lo[r]);
      _mm256_storeu_ps(y + static_cast<size_t>(r) * ldy + 8, hi[r]);
    }
    return;
  }
  alignas(32) float acc[R * kPanel];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(acc + r * kPanel, lo[r]);
    _mm256_store_ps(acc + r * kPanel + 8, hi[r]);
  }
  StoreTile(acc, R, y, ldy, cols);
}
#endif  // __x86_64__

using TileFn = void (*)(const float*, int, const float*, int, float*, int, int);

struct Kernels {
  bool avx2 = false;
  TileFn tile[kRows + 1] = {};
};

template <int... R>
Kernels MakeKernels(bool avx2, std::integer_sequence<int, R...>) {
  Kernels kernels;
  kernels.avx2 = avx2;
#if defined(__x86_64__)
  ((kernels.tile[R + 1] = avx2 ? &TileAvx2<R + 1> : &TilePortable<R + 1>), ...);
#else
  ((kernels.tile[R + 1] = &TilePortable<R + 1>), ...);
#endif
  return kernels;
}

// The AVX2 tiles where the CPU has them (x86); the portable ones, which give the same
// bits, otherwise and on other architectures.
const Kernels& GetKernels() {
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx2 = false;
#endif
  static const Kernels kernels = MakeKernels(avx2, std::make_integer_sequence<int, kRows>());
  return kernels;
}

}  // namespace

PackedMatrix PackedMatrix::Pack(absl::Span<const float> w, int n, int k) {
  PackedMatrix packed;
  packed.n_ = n;
  packed.k_ = k;
  packed.panels_.assign(static_cast<size_t>(packed.num_panels()) * k * kPanel, 0.0f);
  for (int row = 0; row < n; ++row) {
    float* panel = packed.panels_.data() + static_cast<size_t>(row / kPanel) * k * kPanel;
    for (int kk = 0; kk < k; ++kk) {
      panel[static_cast<size_t>(kk) * kPanel + row % kPanel] = w[static_cast<size_t>(row) * k + kk];
    }
  }
  return packed;
}

absl::StatusOr<PackedMatrix> PackedMatrix::FromPanels(int n, int k, std::vector<float> panels) {
  PackedMatrix packed;
  packed.n_ = n;
  packed.k_ = k;
  if (n < 0 || k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("packed matrix [", n, ", ", k, "]"));
  }
  const size_t want = static_cast<size_t>(packed.num_panels()) * k * kPanel;
  if (panels.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("packed matrix [", n, ", ", k, "] needs ", want,
                                                   " values, got ", panels.size()));
  }
  packed.panels_ = std::move(panels);
  return packed;
}

void Gemm(const float* x, int m, int ldx, const PackedMatrix& w, const float* bias, float* y,
          int ldy, ThreadPool* pool) {
  if (m <= 0 || w.n() == 0) return;
  const Kernels& kernels = GetKernels();
  // Rows in blocks that stay in L1 while every panel of the range streams past them.
  constexpr int kRowBlock = 48;
  auto run_panels = [&](int64_t begin, int64_t end, int /*thread*/) {
    for (int row_block = 0; row_block < m; row_block += kRowBlock) {
      const int row_end = std::min(m, row_block + kRowBlock);
      for (int64_t p = begin; p < end; ++p) {
        const int col = static_cast<int>(p) * kPanel;
        const int cols = std::min(kPanel, w.n() - col);
        for (int row = row_block; row < row_end; row += kRows) {
          const int rows = std::min(kRows, row_end - row);
          kernels.tile[rows](x + static_cast<size_t>(row) * ldx, ldx, w.panel(static_cast<int>(p)),
                             w.k(), y + static_cast<size_t>(row) * ldy + col, ldy, cols);
        }
        if (bias != nullptr) {
          for (int row = row_block; row < row_end; ++row) {
            float* out = y + static_cast<size_t>(row) * ldy + col;
            for (int j = 0; j < cols; ++j) out[j] += bias[col + j];
          }
        }
      }
    }
  };
  if (pool == nullptr) {
    run_panels(0, w.num_panels(), 0);
  } else {
    pool->ParallelFor(w.num_panels(), run_panels);
  }
}

bool GemmUsesAvx2() { return GetKernels().avx2; }

}  // namespace lockstep::engine

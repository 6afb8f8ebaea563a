#include "runtime/engine/cpu/gemm.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

std::vector<float> RandomVector(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The documented arithmetic: one FMA chain per element, in k order, from +0.
float FmaChain(const float* x, const float* w_row, int k) {
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc = std::fma(x[i], w_row[i], acc);
  return acc;
}

TEST(GemmTest, EveryElementIsTheDocumentedFmaChain) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 33, 19}, {13, 64, 128}, {6, 17, 5}}) {
    const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, rng);
    const std::vector<float> w = RandomVector(static_cast<size_t>(n) * k, rng);
    const std::vector<float> bias = RandomVector(n, rng);
    const PackedMatrix packed = PackedMatrix::Pack(w, n, k);
    std::vector<float> y(static_cast<size_t>(m) * n);
    Gemm(x.data(), m, k, packed, bias.data(), y.data(), n, nullptr);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        const float expected = FmaChain(&x[i * k], &w[j * k], k) + bias[j];
        ASSERT_EQ(y[i * n + j], expected)
            << "m=" << m << " n=" << n << " k=" << k << " at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(GemmTest, RowResultIndependentOfBatchPositionAndThreads) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int n = 200;
  const int k = 96;
  const std::vector<float> w = RandomVector(static_cast<size_t>(n) * k, rng);
  const PackedMatrix packed = PackedMatrix::Pack(w, n, k);
  const std::vector<float> probe = RandomVector(k, rng);
  std::vector<float> alone(n);
  Gemm(probe.data(), 1, k, packed, nullptr, alone.data(), n, nullptr);
  ThreadPool pool(3);
  for (int m = 1; m <= 40; m += 3) {
    for (int position : {0, m / 2, m - 1}) {
      std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, rng);
      std::memcpy(&x[static_cast<size_t>(position) * k], probe.data(), k * sizeof(float));
      std::vector<float> y(static_cast<size_t>(m) * n);
      Gemm(x.data(), m, k, packed, nullptr, y.data(), n, m % 2 == 0 ? &pool : nullptr);
      ASSERT_EQ(std::memcmp(&y[static_cast<size_t>(position) * n], alone.data(), n * sizeof(float)),
                0)
          << "m=" << m << " position=" << position;
    }
  }
}

TEST(GemmTest, AgreesWithOpenBlas) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int m = 21, n = 70, k = 130;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * k, rng);
  const std::vector<float> w = RandomVector(static_cast<size_t>(n) * k, rng);
  std::vector<float> y(static_cast<size_t>(m) * n), ref(static_cast<size_t>(m) * n);
  Gemm(x.data(), m, k, PackedMatrix::Pack(w, n, k), nullptr, y.data(), n, nullptr);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(), k,
              0.0f, ref.data(), n);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-3f) << i;
}

TEST(GemmTest, StridedInputAndOutput) {
  std::mt19937_64 rng(7);
  const int m = 5, n = 20, k = 8;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m) * 12, rng);  // ldx 12
  const std::vector<float> w = RandomVector(static_cast<size_t>(n) * k, rng);
  std::vector<float> y(static_cast<size_t>(m) * 30, -1.0f);  // ldy 30
  Gemm(x.data(), m, 12, PackedMatrix::Pack(w, n, k), nullptr, y.data(), 30, nullptr);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < 30; ++j) {
      if (j < n) {
        EXPECT_EQ(y[i * 30 + j], FmaChain(&x[i * 12], &w[j * k], k));
      } else {
        EXPECT_EQ(y[i * 30 + j], -1.0f) << "wrote past n at (" << i << ", " << j << ")";
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

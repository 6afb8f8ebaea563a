#include "runtime/engine/cpu/ops.h"

#include <algorithm>
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

std::vector<float> Random(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The batched kernels give exactly the bits of the one-at-a-time ones, whatever the
// count, so attention does not depend on how keys are grouped.
TEST(OpsTest, DotManyAndWeightedSumMatchTheSingleKernelsBitwise) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int n : {2, 8, 12, 32, 64, 72, 128}) {
    for (int count : {1, 3, 4, 9, 33}) {
      const std::vector<float> q = Random(n, rng);
      const std::vector<float> keys = Random(static_cast<size_t>(count) * n, rng);
      const std::vector<float> weights = Random(count, rng);
      std::vector<float> many(count);
      DotMany(q.data(), keys.data(), count, n, 0.3f, many.data());
      std::vector<float> sum = Random(n, rng);
      std::vector<float> expected_sum = sum;
      WeightedSum(weights.data(), keys.data(), count, n, sum.data());
      const std::vector<float> weights_b = Random(count, rng);
      std::vector<float> pair_a = Random(n, rng), pair_b = Random(n, rng);
      std::vector<float> single_a = pair_a, single_b = pair_b;
      WeightedSumPair(weights.data(), weights_b.data(), keys.data(), count, n, pair_a.data(),
                      pair_b.data());
      WeightedSum(weights.data(), keys.data(), count, n, single_a.data());
      WeightedSum(weights_b.data(), keys.data(), count, n, single_b.data());
      ASSERT_EQ(pair_a, single_a) << "n=" << n << " count=" << count;
      ASSERT_EQ(pair_b, single_b) << "n=" << n << " count=" << count;
      for (int t = 0; t < count; ++t) {
        const float one = Dot(q.data(), keys.data() + static_cast<size_t>(t) * n, n) * 0.3f;
        ASSERT_EQ(std::memcmp(&many[t], &one, sizeof(float)), 0)
            << "n=" << n << " count=" << count << " t=" << t;
        Axpy(weights[t], keys.data() + static_cast<size_t>(t) * n, expected_sum.data(), n);
      }
      ASSERT_EQ(sum, expected_sum) << "n=" << n << " count=" << count;
    }
  }
}

TEST(OpsTest, DotIsAccurate) {
  std::mt19937_64 rng(3);
  for (int n : {1, 7, 8, 31, 200}) {
    const std::vector<float> a = Random(n, rng), b = Random(n, rng);
    double expected = 0;
    for (int i = 0; i < n; ++i) expected += double{a[i]} * b[i];
    EXPECT_NEAR(Dot(a.data(), b.data(), n), expected, 1e-5 * n) << n;
  }
}

TEST(OpsTest, ExpIsAccurateAndClamped) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0173f) {
    const double expected = std::exp(static_cast<double>(x));
    ASSERT_NEAR(Exp(x), expected, expected * 4e-7) << x;
  }
  EXPECT_EQ(Exp(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(Exp(1000.0f)));
  EXPECT_EQ(Exp(0.0f), 1.0f);
}

// The vector paths (8 at a time) and the scalar tail agree: a softmax of 8k + r values
// equals, element by element, the same values computed at other lengths' tails.
TEST(OpsTest, SoftmaxAndSiluMatchScalarExp) {
  std::mt19937_64 rng(5);
  for (int n : {1, 7, 8, 9, 64, 67}) {
    std::vector<float> x = Random(n, rng);
    std::vector<float> p = x;
    Softmax(p.data(), n);
    double z = 0;
    const float max_value = *std::max_element(x.begin(), x.end());
    for (float v : x) z += Exp(v - max_value);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(p[i], Exp(x[i] - max_value) / z, 1e-6) << n;
    std::vector<float> up = Random(n, rng), out(n);
    SiluMul(x.data(), up.data(), n, out.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], x[i] / (1.0f + Exp(-x[i])) * up[i]) << "n=" << n << " i=" << i;
    }
  }
}

TEST(OpsTest, RmsNormSoftmaxSiluRope) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> w = {1.0f, 2.0f, 0.5f, 1.0f};
  std::vector<float> out(4);
  RmsNorm(x.data(), w.data(), 4, 1e-6f, out.data());
  const double rms = std::sqrt((1 + 4 + 9 + 0.25) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / rms * w[i], 1e-6);

  std::vector<float> p = {1.0f, 2.0f, 3.0f};
  Softmax(p.data(), 3);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], std::exp(i + 1.0) / z, 1e-6);

  const std::vector<float> gate = {0.0f, 2.0f}, up = {3.0f, -1.0f};
  SiluMul(gate.data(), up.data(), 2, out.data());
  EXPECT_NEAR(out[0], 0.0, 1e-7);
  EXPECT_NEAR(out[1], -2.0 / (1.0 + std::exp(-2.0)), 1e-6);

  // Position 0 is the identity; a rotation keeps each pair's norm.
  std::vector<double> inv_freq = {1.0, 0.01};
  std::vector<float> cos(2), sin(2);
  std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f};
  RopeAngles(0, inv_freq.data(), 2, cos.data(), sin.data());
  ApplyRope(v.data(), 1, 4, cos.data(), sin.data());
  EXPECT_EQ(v, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  RopeAngles(7, inv_freq.data(), 2, cos.data(), sin.data());
  ApplyRope(v.data(), 1, 4, cos.data(), sin.data());
  EXPECT_NEAR(v[0], 1.0 * std::cos(7.0) - 3.0 * std::sin(7.0), 1e-6);
  EXPECT_NEAR(v[2], 3.0 * std::cos(7.0) + 1.0 * std::sin(7.0), 1e-6);
  EXPECT_NEAR(v[0] * v[0] + v[2] * v[2], 10.0, 1e-5);
}

}  // namespace
}  // namespace lockstep::engine

// GPU checks of the per-token kernels against the CPU engine's ops (runtime/engine/cpu/ops.h)
// in f32 on the same bf16-rounded inputs; the reference is rounded to bf16 as the
// kernels store their outputs. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/elementwise_kernels.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/engine/cpu/ops.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using testing::DeviceArray;
using testing::HasNaN;
using testing::RandomBf16Floats;
using testing::RelativeL2;
using testing::RoundedToBf16;
using testing::ToBf16;
using testing::ToFloat;

constexpr double kTolerance = 2e-3;

// Runs `launch` after poisoning `out`, and returns its contents as floats.
template <typename Launch>
std::vector<float> RunPoisoned(DeviceArray<Bf16>& out, Launch&& launch) {
  EXPECT_EQ(out.Poison(), cudaSuccess);
  EXPECT_EQ(launch(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return ToFloat(out.Download());
}

TEST(ElementwiseKernelsTest, AddRmsNormMatchesCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [rows_, n_] :
       std::vector<std::pair<int, int>>{{1, 64}, {7, 1000}, {33, 2048}, {5, 4099}, {2, 8192}}) {
    const int rows = rows_, n = n_;  // lambdas cannot capture structured bindings (C++17)
    SCOPED_TRACE(::testing::Message() << rows << " rows of " << n);
    const std::vector<float> x = RandomBf16Floats(rng, static_cast<size_t>(rows) * n);
    const std::vector<float> res = RandomBf16Floats(rng, x.size(), 3.0f);
    const std::vector<float> w = RandomBf16Floats(rng, n, 0.5f);
    const float eps = 1e-6f;
    for (bool fused : {true, false}) {
      DeviceArray<Bf16> dx(ToBf16(x)), dres(ToBf16(res)), dw(ToBf16(w)), dout(x.size());
      const std::vector<float> got = RunPoisoned(dout, [&] {
        return LaunchAddRmsNorm(dx.get(), fused ? dres.get() : nullptr, dw.get(), rows, n, eps,
                                dout.get(), nullptr);
      });
      std::vector<float> h = x;
      if (fused) {
        for (size_t i = 0; i < h.size(); ++i) h[i] = RoundToBf16(x[i] + res[i]);
        EXPECT_EQ(ToFloat(dres.Download()), h) << "the stored residual";
      }
      std::vector<float> ref(x.size());
      for (int r = 0; r < rows; ++r) {
        engine::RmsNorm(h.data() + r * n, w.data(), n, eps, ref.data() + r * n);
      }
      ASSERT_FALSE(HasNaN(got));
      EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), kTolerance) << "fused " << fused;
    }
  }
}

TEST(ElementwiseKernelsTest, HeadNormAndRopeMatchCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    int heads, head_dim;
    double theta;
  };
  // llama-1B, llama-8B / mistral / mixtral, qwen2 (theta 1e6), and an odd head_dim.
  for (const Shape& shape : {Shape{32, 64, 500000.0}, Shape{32, 128, 500000.0},
                             Shape{28, 128, 1000000.0}, Shape{3, 80, 10000.0}}) {
    for (int tokens : {1, 13, 70}) {
      SCOPED_TRACE(::testing::Message()
                   << tokens << " tokens, " << shape.heads << " heads of " << shape.head_dim);
      const int hd = shape.head_dim;
      const int half = hd / 2;
      // Rows with padding after the heads, as in a fused QKV output.
      const int64_t stride = static_cast<int64_t>(shape.heads) * hd + 24;
      const std::vector<float> x = RandomBf16Floats(rng, tokens * stride);
      const std::vector<float> w = RandomBf16Floats(rng, hd, 0.5f);
      std::vector<int32_t> positions(tokens);
      for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 9000);
      std::vector<double> inv_freq(half);
      for (int i = 0; i < half; ++i) inv_freq[i] = 1.0 / std::pow(shape.theta, 2.0 * i / hd);

      DeviceArray<Bf16> dx(ToBf16(x)), dw(ToBf16(w));
      DeviceArray<int32_t> dpos(positions);
      DeviceArray<double> dfreq(inv_freq);
      ASSERT_EQ(
          LaunchHeadRmsNorm(dx.get(), stride, tokens, shape.heads, hd, dw.get(), 1e-6f, nullptr),
          cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // The reference normalises the same bf16 inputs, then ropes the kernel's own
      // (bf16) normalised values, so each kernel is checked on its own.
      std::vector<float> normed = ToFloat(dx.Download());
      std::vector<float> ref_norm = x;
      for (int t = 0; t < tokens; ++t) {
        for (int h = 0; h < shape.heads; ++h) {
          float* v = ref_norm.data() + t * stride + h * hd;
          engine::RmsNorm(v, w.data(), hd, 1e-6f, v);
        }
      }
      ASSERT_FALSE(HasNaN(normed));
      EXPECT_LE(RelativeL2(normed, RoundedToBf16(ref_norm)), kTolerance) << "head norm";

      ASSERT_EQ(
          LaunchRope(dx.get(), stride, tokens, shape.heads, hd, dpos.get(), dfreq.get(), nullptr),
          cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> roped = ToFloat(dx.Download());
      std::vector<float> ref_rope = normed;
      std::vector<float> cos(half), sin(half);
      for (int t = 0; t < tokens; ++t) {
        engine::RopeAngles(positions[t], inv_freq.data(), half, cos.data(), sin.data());
        engine::ApplyRope(ref_rope.data() + t * stride, shape.heads, hd, cos.data(), sin.data());
      }
      ASSERT_FALSE(HasNaN(roped));
      EXPECT_LE(RelativeL2(roped, RoundedToBf16(ref_rope)), kTolerance) << "rope";
    }
  }
}

TEST(ElementwiseKernelsTest, SiluMulMatchesCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [rows_, n_] : std::vector<std::pair<int, int>>{{1, 5}, {9, 1000}, {64, 14336}}) {
    const int rows = rows_, n = n_;
    SCOPED_TRACE(::testing::Message() << rows << " rows of " << n);
    // A fused gate|up GEMM output: row r is [gate (n) | up (n)].
    const std::vector<float> gate_up = RandomBf16Floats(rng, static_cast<size_t>(rows) * 2 * n, 2);
    DeviceArray<Bf16> din(ToBf16(gate_up)), dout(static_cast<size_t>(rows) * n);
    const std::vector<float> got = RunPoisoned(dout, [&] {
      return LaunchSiluMul(din.get(), din.get() + n, 2 * n, rows, n, dout.get(), n, nullptr);
    });
    std::vector<float> ref(static_cast<size_t>(rows) * n);
    for (int r = 0; r < rows; ++r) {
      engine::SiluMul(gate_up.data() + r * 2 * n, gate_up.data() + r * 2 * n + n, n,
                      ref.data() + r * n);
    }
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), kTolerance);
  }
}

// The bias add of a projection (qwen2's QKV bias), in place over rows with padding
// after the n columns: exactly y + bias rounded once to the element type, the padding
// untouched; bf16 and f32.
TEST(ElementwiseKernelsTest, AddBiasIsExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [rows_, n_] : std::vector<std::pair<int, int>>{{1, 7}, {13, 640}, {3, 5000}}) {
    const int rows = rows_, n = n_;
    SCOPED_TRACE(::testing::Message() << rows << " rows of " << n);
    const int64_t stride = n + 9;
    const std::vector<float> y = RandomBf16Floats(rng, static_cast<size_t>(rows) * stride);
    const std::vector<float> bias = RandomBf16Floats(rng, n, 0.3f);
    std::vector<float> want = y;
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < n; ++i) want[r * stride + i] = y[r * stride + i] + bias[i];
    }
    DeviceArray<Bf16> dy(ToBf16(y)), dbias(ToBf16(bias));
    ASSERT_EQ(LaunchAddBias(dy.get(), stride, rows, n, dbias.get(), nullptr), cudaSuccess);
    DeviceArray<float> fy(y), fbias(bias);
    ASSERT_EQ(LaunchAddBias(fy.get(), stride, rows, n, fbias.get(), nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(ToFloat(dy.Download()), RoundedToBf16(want)) << "bf16";
    EXPECT_EQ(fy.Download(), want) << "f32";
  }
}

// The shared experts' sum (LaunchAdd): each element's f32 sum rounded once, over sizes
// that are and are not a multiple of the CTA and beyond one grid's stride.
TEST(ElementwiseKernelsTest, AddIsExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const int64_t n : {int64_t{1}, int64_t{256}, int64_t{1000}, int64_t{300001}}) {
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const std::vector<float> y = RandomBf16Floats(rng, n);
    const std::vector<float> x = RandomBf16Floats(rng, n, 0.3f);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = y[i] + x[i];
    DeviceArray<Bf16> dy(ToBf16(y)), dx(ToBf16(x));
    ASSERT_EQ(LaunchAdd(dy.get(), dx.get(), n, nullptr), cudaSuccess);
    DeviceArray<float> fy(y), fx(x);
    ASSERT_EQ(LaunchAdd(fy.get(), fx.get(), n, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(ToFloat(dy.Download()), RoundedToBf16(want)) << "bf16";
    EXPECT_EQ(fy.Download(), want) << "f32";
  }
}

// The f32 variants (the engine's `cuda.dtype: f32`) against the CPU ops in f32: only
// the reduction order differs, so relative L2 <= 1e-5.
TEST(ElementwiseKernelsTest, F32VariantsMatchCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  constexpr double kF32Tolerance = 1e-5;
  const int rows = 5, n = 4099;
  const std::vector<float> x = RandomBf16Floats(rng, static_cast<size_t>(rows) * n);
  const std::vector<float> res = RandomBf16Floats(rng, x.size(), 3.0f);
  const std::vector<float> w = RandomBf16Floats(rng, n, 0.5f);
  {
    DeviceArray<float> dx(x), dres(res), dw(w), dout(x.size());
    ASSERT_EQ(dout.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchAddRmsNorm(dx.get(), dres.get(), dw.get(), rows, n, 1e-6f, dout.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> h(x.size()), ref(x.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = x[i] + res[i];
    EXPECT_EQ(dres.Download(), h) << "the stored residual";
    for (int r = 0; r < rows; ++r) {
      engine::RmsNorm(h.data() + r * n, w.data(), n, 1e-6f, ref.data() + r * n);
    }
    const std::vector<float> got = dout.Download();
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, ref), kF32Tolerance) << "RMSNorm";
  }
  {
    const int width = 1000;
    const std::vector<float> gate_up =
        RandomBf16Floats(rng, static_cast<size_t>(rows) * 2 * width, 2);
    DeviceArray<float> din(gate_up), dout(static_cast<size_t>(rows) * width);
    ASSERT_EQ(dout.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchSiluMul(din.get(), din.get() + width, 2 * width, rows, width, dout.get(), width,
                            nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> ref(static_cast<size_t>(rows) * width);
    for (int r = 0; r < rows; ++r) {
      engine::SiluMul(gate_up.data() + r * 2 * width, gate_up.data() + r * 2 * width + width, width,
                      ref.data() + r * width);
    }
    const std::vector<float> got = dout.Download();
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, ref), kF32Tolerance) << "SiLU mul";
  }
  {
    const int tokens = 9, heads = 4, hd = 128, half = hd / 2;
    const int64_t stride = heads * hd + 8;
    const std::vector<float> q = RandomBf16Floats(rng, tokens * stride);
    const std::vector<float> qw = RandomBf16Floats(rng, hd, 0.5f);
    std::vector<int32_t> positions(tokens);
    for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 5000);
    std::vector<double> inv_freq(half);
    for (int i = 0; i < half; ++i) inv_freq[i] = 1.0 / std::pow(1e6, 2.0 * i / hd);
    DeviceArray<float> dq(q), dqw(qw);
    DeviceArray<int32_t> dpos(positions);
    DeviceArray<double> dfreq(inv_freq);
    ASSERT_EQ(LaunchHeadRmsNorm(dq.get(), stride, tokens, heads, hd, dqw.get(), 1e-6f, nullptr),
              cudaSuccess);
    ASSERT_EQ(LaunchRope(dq.get(), stride, tokens, heads, hd, dpos.get(), dfreq.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> ref = q, cos(half), sin(half);
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < heads; ++h) {
        float* v = ref.data() + t * stride + h * hd;
        engine::RmsNorm(v, qw.data(), hd, 1e-6f, v);
      }
      engine::RopeAngles(positions[t], inv_freq.data(), half, cos.data(), sin.data());
      engine::ApplyRope(ref.data() + t * stride, heads, hd, cos.data(), sin.data());
    }
    const std::vector<float> got = dq.Download();
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, ref), kF32Tolerance) << "head norm + rope";
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

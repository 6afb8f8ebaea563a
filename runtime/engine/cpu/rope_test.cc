// RoPE frequencies: plain RoPE, and YaRN's blend (DeepSeek-V3's published formula, the
// values worked out here by hand), its magnitude, and the interleaved rotation.
#include "runtime/engine/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

ModelConfig Config(bool yarn) {
  ModelConfig config;
  config.head_dim = 16;
  config.rope_theta = 10000.0;
  if (yarn) {
    config.mla = true;
    config.mla_dims.qk_rope_head_dim = 16;
    config.yarn = true;
    config.yarn_scaling = {.factor = 4.0,
                           .original_max_position = 64,
                           .beta_fast = 32.0,
                           .beta_slow = 1.0,
                           .mscale = 1.0,
                           .mscale_all_dim = 0.0};
  }
  return config;
}

TEST(RopeTest, PlainFrequencies) {
  const std::vector<double> f = RopeInverseFrequencies(Config(false));
  ASSERT_EQ(f.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(f[i], 1.0 / std::pow(10000.0, 2.0 * i / 16));
  EXPECT_EQ(RopeMagnitude(Config(false)), 1.0f);
}

// dim 16, base 1e4, original 64: the correction dims are 16 ln(64 / (2 pi r)) / (2 ln 1e4)
// = -0.994 for r = 32 (floor -1, clamped to 0) and 2.016 for r = 1 (ceil: 3). Dimension
// 0 keeps its frequency, i >= 3 are divided by the factor, 1 and 2 blend linearly.
TEST(RopeTest, YarnBlendsByTheCorrectionRange) {
  const std::vector<double> f = RopeInverseFrequencies(Config(true));
  ASSERT_EQ(f.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const double plain = 1.0 / std::pow(10000.0, 2.0 * i / 16);
    const double ramp = std::clamp(i / 3.0, 0.0, 1.0);
    EXPECT_NEAR(f[i], plain / 4.0 * ramp + plain * (1.0 - ramp), 1e-15) << i;
  }
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[7], 1.0 / std::pow(10000.0, 14.0 / 16) / 4.0);
  EXPECT_NEAR(RopeMagnitude(Config(true)), 0.1 * std::log(4.0) + 1.0, 1e-6);
}

TEST(RopeTest, InterleavedPairs) {
  const float cos[] = {0.0f, 1.0f};
  const float sin[] = {1.0f, 0.0f};
  std::vector<float> v = {1, 2, 3, 4};
  ApplyRopeInterleaved(v.data(), 1, 4, 4, cos, sin);
  EXPECT_EQ(v, (std::vector<float>{-2, 1, 3, 4}));  // pair 0 by 90 degrees, pair 1 by 0
  std::vector<float> two = {1, 2, 0, 0, 0, 5, 6, 0, 0, 0};
  ApplyRopeInterleaved(two.data(), 2, 5, 2, cos, sin);
  EXPECT_EQ(two, (std::vector<float>{-2, 1, 0, 0, 0, -6, 5, 0, 0, 0}));
}

}  // namespace
}  // namespace lockstep::engine

#include "runtime/cuda/kernels/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

float FromBits(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The nearest of the two bf16 values around a finite f (ties: even mantissa); past the
// largest finite bf16 the upper neighbour is 2^128 in magnitude (it rounds to infinity).
uint16_t NearestBf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  const uint16_t down = static_cast<uint16_t>(u >> 16);
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double lo = FromBits(static_cast<uint32_t>(down) << 16);
  double hi = FromBits(static_cast<uint32_t>(up) << 16);
  if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), hi);
  const double d_lo = std::fabs(f - lo);
  const double d_hi = std::fabs(hi - f);
  if (d_lo < d_hi) return down;
  if (d_hi < d_lo) return up;
  return (down & 1) == 0 ? down : up;
}

TEST(Bf16Test, RoundsToNearestEven) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
    const float f = FromBits(u);
    if (std::isnan(f) || std::isinf(f)) continue;
    ASSERT_EQ(FloatToBf16(f).bits, NearestBf16(f)) << std::hex << "bits 0x" << u;
  }
  EXPECT_EQ(FloatToBf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
  EXPECT_EQ(RoundToBf16(1.0f + 1.0f / 256), 1.0f);  // a tie goes to the even mantissa
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7f800001u)))));  // low-bit NaN
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace lockstep::cuda::kernels

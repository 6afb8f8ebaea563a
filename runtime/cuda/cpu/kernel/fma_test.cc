// The kernels' fmaf (prelude.h's macro over kernel::Fma) against the C library's fmaf:
// the same bits for seeded random operands over all exponents, for special values, and
// for operands whose product needs the single rounding (a * b + c rounded twice differs).
#include "runtime/cuda/cpu/kernel/prelude.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace {

// The C library's function (not followed by an argument list, so not the macro).
float (*const libm_fmaf)(float, float, float) = &::fmaf;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

void ExpectSameAsLibm(float a, float b, float c) {
  const float got = fmaf(a, b, c);
  const float want = libm_fmaf(a, b, c);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << a << " * " << b << " + " << c;
  } else {
    EXPECT_EQ(Bits(got), Bits(want)) << std::hexfloat << a << " * " << b << " + " << c;
  }
}

TEST(FmaTest, RoundsOnceWhereTwoRoundingsDiffer) {
  std::cout << "kernel fmaf inline (FMA3): "
            << (lockstep::cuda_cpu::kernel::kCpuHasFma ? "yes" : "no, the C library's") << "\n";
  // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: rounded before the add it loses 2^-46.
  const float a = 1.0f + std::ldexp(1.0f, -23);
  const float c = -(1.0f + std::ldexp(1.0f, -22));
  EXPECT_EQ(fmaf(a, a, c), std::ldexp(1.0f, -46));
  volatile float product = a * a;  // rounded on its own
  EXPECT_EQ(product + c, 0.0f);
  ExpectSameAsLibm(a, a, c);
}

TEST(FmaTest, SpecialValuesAsTheCLibrary) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float values[] = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          inf,
                          -inf,
                          nan,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          3.0f};
  for (float a : values) {
    for (float b : values) {
      for (float c : values) ExpectSameAsLibm(a, b, c);
    }
  }
}

TEST(FmaTest, RandomOperandsAsTheCLibrary) {
  const uint64_t seed = std::random_device()();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1'000'000; ++i) {
    // Any bit pattern, and operands near 1 whose product meets c's magnitude.
    const float a = FromBits(static_cast<uint32_t>(rng()));
    const float b = FromBits(static_cast<uint32_t>(rng()));
    const float c = FromBits(static_cast<uint32_t>(rng()));
    ExpectSameAsLibm(a, b, c);
    const float x = FromBits(0x3f800000u ^ static_cast<uint32_t>(rng() & 0x807fffffu));
    const float y = FromBits(0x3f800000u ^ static_cast<uint32_t>(rng() & 0x807fffffu));
    ExpectSameAsLibm(x, y, -(x * y));
    if (HasFailure()) return;
  }
}

}  // namespace

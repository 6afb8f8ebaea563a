// <cuda_bf16.h> of the CPU execution layer against the host's bf16.h (whose rounding
// the GPU kernels' results are compared with): the same bits for every non-NaN float
// of a dense sweep and the rounding boundaries; NaN becomes the device's 0x7fff.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "runtime/cuda/kernels/bf16.h"

namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

bool IsNan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

bool SameRounding(uint32_t u) {
  const float f = FromBits(u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f)) ==
         lockstep::cuda::kernels::FloatToBf16(f).bits;
}

void ExpectSameRounding(uint32_t u) { EXPECT_TRUE(SameRounding(u)) << std::hex << "0x" << u; }

TEST(CudaBf16Test, RoundsAsTheHostForEveryNonNanInASweep) {
  // Every 251st bit pattern (17 million floats, all exponents and both signs).
  uint64_t differ = 0;
  uint32_t first = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
    const uint32_t bits = static_cast<uint32_t>(u);
    if (!IsNan(bits) && !SameRounding(bits) && differ++ == 0) first = bits;
  }
  EXPECT_EQ(differ, 0u) << "first at 0x" << std::hex << first;
}

TEST(CudaBf16Test, RoundsAsTheHostAtEveryTieAndItsNeighbours) {
  // Low halves 0x7fff, 0x8000, 0x8001 (below, at and above the tie) for every high half.
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t u = high << 16 | low;
      if (!IsNan(u)) ExpectSameRounding(u);
    }
  }
  // Ties to even: 1 + 2^-8 rounds down to 1, 1 + 3 * 2^-8 up to 1 + 2^-6.
  EXPECT_EQ(__bfloat162float(__float2bfloat16_rn(1.00390625f)), 1.0f);
  EXPECT_EQ(__bfloat162float(__float2bfloat16_rn(1.01171875f)), 1.015625f);
  // Overflow to infinity and the largest finite value.
  EXPECT_EQ(__bfloat162float(__float2bfloat16_rn(std::numeric_limits<float>::max())), INFINITY);
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(FromBits(0x7f7f7fffu))), 0x7f7fu);
}

TEST(CudaBf16Test, NanBecomesTheCanonicalDeviceNan) {
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0xffffffffu, 0x7fa12345u}) {
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(FromBits(u))), 0x7fffu) << std::hex << u;
  }
  EXPECT_TRUE(std::isnan(__bfloat162float(__ushort_as_bfloat16(0x7fff))));
}

TEST(CudaBf16Test, WidensExactly) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const float f = __bfloat162float(__ushort_as_bfloat16(static_cast<uint16_t>(bits)));
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    ASSERT_EQ(u, bits << 16);
    const __nv_bfloat16 b = __ushort_as_bfloat16(static_cast<uint16_t>(bits));
    ASSERT_EQ(static_cast<float>(b) == f || std::isnan(f), true);
  }
}

}  // namespace

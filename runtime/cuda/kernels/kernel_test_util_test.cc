#include "runtime/cuda/kernels/kernel_test_util.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels::testing {
namespace {

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// RandomBf16Floats draws exactly what std::normal_distribution<float> (rounded to bf16)
// draws from the same generator, and leaves the generator in the same state: the
// kernels' checks see the same inputs as before it stopped using the library's draw.
TEST(RandomBf16FloatsTest, SameBitsAsTheStandardNormalDistribution) {
  for (uint64_t seed : {1ull, 42ull, 20261205ull}) {
    for (float stddev : {1.0f, 0.02f, 3.5f}) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{200001}}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " stddev " << stddev << " n " << n);
        std::mt19937_64 ours(seed);
        std::mt19937_64 library(seed);
        const std::vector<float> got = RandomBf16Floats(ours, n, stddev);
        std::normal_distribution<float> dist(0.0f, stddev);
        ASSERT_EQ(got.size(), n);
        size_t mismatches = 0;
        for (size_t i = 0; i < n; ++i) {
          const float want = RoundToBf16(dist(library));
          if (Bits(got[i]) != Bits(want) && mismatches++ < 5) {
            ADD_FAILURE() << "value " << i << ": " << got[i] << " (0x" << std::hex << Bits(got[i])
                          << "), the library's " << want << " (0x" << Bits(want) << ")";
          }
        }
        EXPECT_EQ(mismatches, 0u);
        EXPECT_EQ(ours(), library()) << "the generators' states differ after the draws";
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels::testing

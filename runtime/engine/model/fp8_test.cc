#include "runtime/engine/model/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

// The E4M3FN value of `code` from the format's definition, written out independently
// of fp8.cc's table.
double DefinitionValue(int code) {
  const double sign = (code & 0x80) != 0 ? -1.0 : 1.0;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 7;
  if (exponent == 0) return sign * (mantissa / 8.0) * std::pow(2.0, -6);
  return sign * (1.0 + mantissa / 8.0) * std::pow(2.0, exponent - 7);
}

TEST(Fp8Test, DecodesAll256Codes) {
  for (int code = 0; code < 256; ++code) {
    const float value = Fp8E4m3ToFloat(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(value), DefinitionValue(code)) << "code " << code;
    EXPECT_EQ(std::signbit(value), (code & 0x80) != 0) << code;
    // Every finite code encodes back to itself (-0 included).
    EXPECT_EQ(FloatToFp8E4m3(value), code) << "code " << code;
  }
  EXPECT_EQ(Fp8E4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0xfe), -448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(Fp8E4m3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(Fp8E4m3ToFloat(0x78), 256.0f);                // exponent 15 is finite (no inf)
}

TEST(Fp8Test, RoundsToNearestTiesToEven) {
  struct Case {
    float value;
    uint8_t code;
  };
  const Case cases[] = {
      {1.0625f, 0x38},                  // 1 | 1.125: tie -> 1 (mantissa 000)
      {1.0625001f, 0x39},               // just above the tie
      {1.1875f, 0x3a},                  // 1.125 | 1.25: tie -> 1.25 (mantissa 010)
      {1.18749f, 0x39},                 // just below
      {std::ldexp(1.0f, -10), 0x00},    // 0 | 2^-9: tie -> 0
      {std::ldexp(1.01f, -10), 0x01},   // above the tie
      {std::ldexp(3.0f, -10), 0x02},    // 2^-9 | 2^-8: tie -> code 2
      {std::ldexp(7.5f, -9), 0x08},     // largest subnormal | smallest normal: tie -> normal
      {400.0f, 0x7c},                   // 384 | 416: tie -> 384 (even code 0x7c)
      {401.0f, 0x7d},                   // above it: 416
      {432.0f, 0x7e},                   // 416 | 448: tie -> 448 (even code 0x7e)
      {-1.0625f, 0xb8},                 // negative ties behave the same
      {-432.0f, 0xfe},
      {std::ldexp(1.0f, -12), 0x00},    // underflow to +0
      {-std::ldexp(1.0f, -12), 0x80},   // and to -0
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToFp8E4m3(c.value), c.code) << c.value;
  }
}

TEST(Fp8Test, SaturatesAndKeepsNaN) {
  for (float value : {448.0f, 449.0f, 464.0f, 480.0f, 1e30f,
                      std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(FloatToFp8E4m3(value), 0x7e) << value;
    EXPECT_EQ(FloatToFp8E4m3(-value), 0xfe) << -value;
  }
  EXPECT_EQ(FloatToFp8E4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(FloatToFp8E4m3(-std::nanf("")), 0xff);
}

// Random magnitudes encode to a nearest code: no finite code is strictly closer.
TEST(Fp8Test, RandomValuesEncodeToANearestCode) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_magnitude(-12.0, 9.0);
  for (int i = 0; i < 20000; ++i) {
    const float value = static_cast<float>((rng() & 1 ? -1.0 : 1.0) *
                                           std::pow(2.0, log_magnitude(rng)));
    const uint8_t code = FloatToFp8E4m3(value);
    const double error = std::fabs(value - DefinitionValue(code));
    if (std::fabs(value) >= 448.0f) {
      ASSERT_EQ(code & 0x7f, 0x7e) << value;
      continue;
    }
    for (int other = 0; other < 256; ++other) {
      if ((other & 0x7f) == 0x7f) continue;
      ASSERT_LE(error, std::fabs(value - DefinitionValue(other)))
          << value << " encoded as " << int{code} << " but " << other << " is closer";
    }
  }
}

TEST(Fp8Test, ScaleShapeCoversPartialEdgeBlocks) {
  EXPECT_EQ(Fp8ScaleShape(128, 128), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Fp8ScaleShape(129, 256), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Fp8ScaleShape(1, 257), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Fp8ScaleShape(7168, 1536), (std::vector<int64_t>{56, 12}));
}

TEST(Fp8Test, DequantizesEachElementWithItsBlocksScale) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int64_t rows = 130;  // blocks of 128 and 2 rows
  const int64_t cols = 257;  // blocks of 128, 128 and 1 column
  std::vector<uint8_t> codes(rows * cols);
  for (uint8_t& code : codes) {
    code = static_cast<uint8_t>(rng() % 256);
    if ((code & 0x7f) == 0x7f) code = 0x3f;
  }
  const std::vector<float> scales = {0.5f, 2.0f, 0.25f, 3.0f, 1e-3f, 7.0f};  // [2, 3]
  std::vector<float> out(rows * cols);
  ASSERT_THAT(DequantizeFp8Blocks(codes, rows, cols, scales, absl::MakeSpan(out)), IsOk());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int block = static_cast<int>((r >= 128 ? 3 : 0) + (c >= 256 ? 2 : c >= 128 ? 1 : 0));
      ASSERT_EQ(out[r * cols + c], Fp8E4m3ToFloat(codes[r * cols + c]) * scales[block])
          << "(" << r << ", " << c << ")";
    }
  }
  // The last element sits in the 2 x 1 corner block.
  codes.back() = 0x38;  // 1.0
  ASSERT_THAT(DequantizeFp8Blocks(codes, rows, cols, scales, absl::MakeSpan(out)), IsOk());
  EXPECT_EQ(out.back(), 7.0f);
}

TEST(Fp8Test, DequantizeRefusesSizesThatDisagree) {
  std::vector<uint8_t> codes(130 * 257);
  std::vector<float> out(130 * 257);
  const std::vector<float> too_few = {1, 1, 1, 1};  // [2, 2]: misses the last column block
  EXPECT_THAT(DequantizeFp8Blocks(codes, 130, 257, too_few, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[2, 3]")));
  const std::vector<float> scales(6, 1.0f);
  EXPECT_THAT(DequantizeFp8Blocks(codes, 130, 256, scales, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Fp8Test, QuantizeRoundTripsWithinHalfACodeStep) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 200;
  const int64_t cols = 150;
  std::vector<float> values(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    // Blocks of very different magnitudes, and one all-zero block.
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    values[i] = (r >= 128 && c >= 128) ? 0.0f : normal(rng) * (r < 128 ? 1e-3f : 50.0f);
  }
  const Fp8Blocks blocks = QuantizeFp8Blocks(values, rows, cols);
  ASSERT_EQ(blocks.scale_inv.size(), 4u);
  EXPECT_EQ(blocks.scale_inv[3], 1.0f);  // the all-zero block
  std::vector<float> back(rows * cols);
  ASSERT_THAT(DequantizeFp8Blocks(blocks.codes, rows, cols, blocks.scale_inv,
                                  absl::MakeSpan(back)),
              IsOk());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const int64_t block = (i / cols >= 128 ? 2 : 0) + (i % cols >= 128 ? 1 : 0);
    const float scale = blocks.scale_inv[block];
    // Half a step of 3 mantissa bits (relative 2^-4), or half the subnormal step.
    const float bound = std::max(std::fabs(values[i]) * 0.0625f, scale * std::ldexp(1.0f, -10));
    ASSERT_LE(std::fabs(back[i] - values[i]), bound * 1.0001f) << i;
  }
  // Each block's largest magnitude uses the top code.
  int top = 0;
  for (uint8_t code : blocks.codes) top += (code & 0x7f) == 0x7e;
  EXPECT_GE(top, 3);
}

TEST(Fp8Test, ScaleNameAppendsScaleInv) {
  EXPECT_EQ(Fp8ScaleName("model.layers.3.self_attn.kv_b_proj.weight"),
            "model.layers.3.self_attn.kv_b_proj.weight_scale_inv");
}

}  // namespace
}  // namespace lockstep::engine

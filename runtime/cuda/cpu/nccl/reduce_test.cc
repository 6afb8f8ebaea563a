// Unit tests of the NCCL layer's host pieces: reductions in rank order, 16-bit float
// rounding, and fault specs.
#include "runtime/cuda/cpu/nccl/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/nccl/faults.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

TEST(NcclReduceTest, SumMaxMinProdAvgOverThreeRanks) {
  const std::vector<int32_t> a = {1, -5, 7}, b = {2, 9, -7}, c = {3, 0, 1};
  const std::vector<const void*> inputs = {a.data(), b.data(), c.data()};
  std::vector<int32_t> out(3);
  ReduceInRankOrder(ncclInt32, ncclSum, inputs, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{6, 4, 1}));
  ReduceInRankOrder(ncclInt32, ncclMax, inputs, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{3, 9, 7}));
  ReduceInRankOrder(ncclInt32, ncclMin, inputs, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, -5, -7}));
  ReduceInRankOrder(ncclInt32, ncclProd, inputs, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{6, 0, -49}));
  ReduceInRankOrder(ncclInt32, ncclAvg, inputs, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{2, 1, 0}));
}

TEST(NcclReduceTest, OutputMayAliasAnInput) {
  std::vector<float> a = {1.5f, 2.0f};
  const std::vector<float> b = {0.25f, -4.0f};
  ReduceInRankOrder(ncclFloat32, ncclSum, {a.data(), b.data()}, 2, a.data());
  EXPECT_EQ(a, (std::vector<float>{1.75f, -2.0f}));
}

TEST(NcclReduceTest, FloatSumsInRankOrder) {
  // (1e8 + 1) - 1e8 is 0 in float, 1e8 + (1 - 1e8) is 8: the order is rank order.
  const float a = 1e8f, b = 1.0f, c = -1e8f;
  float out = 0;
  ReduceInRankOrder(ncclFloat32, ncclSum, {&a, &b, &c}, 1, &out);
  EXPECT_EQ(out, (a + b) + c);
}

TEST(NcclReduceTest, HalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);               // halfway past the max: infinity
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // tie, to the even mantissa
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);     // tie, to the even mantissa
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half survives the round trip
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h | 0x8000))), h | 0x8000) << h;
  }
}

TEST(NcclReduceTest, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  uint32_t bits = 0x3f808000;  // exactly halfway between 0x3f80 and 0x3f81
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBfloat16(f), 0x3f80);
  bits = 0x3f818000;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBfloat16(f), 0x3f82);
  const uint16_t x = FloatToBfloat16(0.1f), y = FloatToBfloat16(0.2f);
  uint16_t out = 0;
  ReduceInRankOrder(ncclBfloat16, ncclSum, {&x, &y}, 1, &out);
  EXPECT_EQ(out, FloatToBfloat16(Bfloat16ToFloat(x) + Bfloat16ToFloat(y)));
}

TEST(NcclReduceTest, TypesAndOps) {
  EXPECT_EQ(TypeBytes(ncclBfloat16), 2u);
  EXPECT_EQ(TypeBytes(ncclFloat64), 8u);
  EXPECT_EQ(TypeBytes(ncclNumTypes), 0u);
  EXPECT_FALSE(Reducible(ncclFloat8e4m3));
  EXPECT_TRUE(ValidRedOp(ncclAvg));
  EXPECT_FALSE(ValidRedOp(ncclNumOps));
  EXPECT_STREQ(TypeName(ncclFloat32), "float32");
  EXPECT_STREQ(RedOpName(ncclMax), "max");
}

TEST(NcclFaultsTest, ParsesPerRankFaults) {
  absl::StatusOr<Faults> one = ParseFaults("kill@3:rank=1, error@2, never_arrive:rank=2", 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->kill_at_op, 3);
  EXPECT_EQ(one->error_at_op, 2);
  EXPECT_FALSE(one->never_arrive);
  absl::StatusOr<Faults> two = ParseFaults("kill@3:rank=1,never_arrive:rank=2", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->kill_at_op, 0);
  EXPECT_TRUE(two->never_arrive);
}

TEST(NcclFaultsTest, RefusesBadSpecsNamingTheEntry) {
  for (const char* bad : {"kill", "kill@0", "error@x", "explode@1", "kill@1:rank=-1",
                          "kill@1:node=2", "never_arrive@2"}) {
    absl::StatusOr<Faults> faults = ParseFaults(bad, 0);
    ASSERT_FALSE(faults.ok()) << bad;
    EXPECT_NE(faults.status().message().find(bad), std::string::npos) << faults.status();
  }
}

}  // namespace
}  // namespace lockstep::cuda_cpu::nccl

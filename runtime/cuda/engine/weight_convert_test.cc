#include "runtime/cuda/engine/weight_convert.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::cuda {
namespace {

TEST(WeightConvertTest, Bf16RoundsToNearestEvenAndF32KeepsTheBits) {
  const std::vector<float> values = {1.0f, 1.00390625f /* a tie: rounds to 1 */,
                                     1.01171875f /* a tie: rounds up to even */, -3.5e-5f};
  const std::vector<std::byte> bf16 = ToElements(values, 2);
  ASSERT_EQ(bf16.size(), 8u);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, bf16.data() + 2 * i, 2);
    EXPECT_EQ(bits, kernels::FloatToBf16(values[i]).bits) << i;
  }
  uint16_t tie = 0;
  std::memcpy(&tie, bf16.data() + 2, 2);
  EXPECT_EQ(kernels::Bf16ToFloat({tie}), 1.0f);
  const std::vector<std::byte> f32 = ToElements(values, 4);
  ASSERT_EQ(f32.size(), 16u);
  EXPECT_EQ(std::memcmp(f32.data(), values.data(), 16), 0);
}

TEST(WeightConvertTest, ARankUploadsItsShareOfTheExperts) {
  const engine::ModelConfig config = *engine::PresetConfig("tiny-moe");
  const engine::ModelPlan one = engine::PlanWeights(config, 0, 1);
  EXPECT_EQ(PlanBytes(one, 2), one.TotalElements() * 2);
  EXPECT_EQ(PlanBytes(one, 4), one.TotalElements() * 4);
  // Over 4 ranks each holds 2 of the 8 experts of every layer, and all of the rest.
  size_t sum = 0;
  for (int rank = 0; rank < 4; ++rank) sum += PlanBytes(engine::PlanWeights(config, rank, 4), 2);
  const size_t expert = 3 * static_cast<size_t>(config.moe_intermediate_size) * config.hidden_size;
  const size_t shared = one.TotalElements() - expert * config.num_experts * config.num_layers;
  EXPECT_EQ(sum, 2 * (4 * shared + expert * config.num_experts * config.num_layers));
}

TEST(WeightConvertTest, DescriptionNamesTheWeightShapeTypeAndSize) {
  const engine::ModelConfig config = *engine::PresetConfig("tiny");
  const engine::ModelPlan plan = engine::PlanWeights(config, 0, 1);
  EXPECT_EQ(DescribeWeight(plan.layers[3].qkv, 2),
            "model.layers.3.qkv [256, 128] bf16, 65536 bytes");
  EXPECT_EQ(DescribeWeight(plan.final_norm, 4), "model.final_norm [128] f32, 512 bytes");
}

}  // namespace
}  // namespace lockstep::cuda

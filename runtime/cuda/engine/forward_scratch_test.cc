#include "runtime/cuda/engine/forward_scratch.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

engine::ModelConfig Preset(const char* name) { return *engine::PresetConfig(name); }

ScratchOptions Options(int element_bytes, int world = 1) {
  ScratchOptions o;
  o.element_bytes = element_bytes;
  o.max_rows = 100;
  o.max_seqs = 8;
  o.max_decode_rows = 32;
  o.max_table_stride = 16;
  o.max_splits = 4;
  o.world_size = world;
  return o;
}

// A model the attention kernels cannot run is refused when the engine plans its
// scratch at load, naming the shape, not at its first decode step.
TEST(ForwardScratchTest, RefusesShapesTheAttentionKernelsCannotRun) {
  engine::ModelConfig config = Preset("tiny");
  ASSERT_THAT(PlanScratch(config, Options(2)), IsOk());
  config.num_kv_heads = 1;
  config.num_heads = kernels::kMaxDecodeGroup;
  EXPECT_THAT(PlanScratch(config, Options(2)), IsOk());
  config.num_heads = 2 * kernels::kMaxDecodeGroup;
  const absl::StatusOr<ScratchLayout> big_group = PlanScratch(config, Options(2));
  EXPECT_THAT(big_group, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(big_group.status().message().find("GQA group of 32"), std::string::npos)
      << big_group.status();
  config.num_heads = 6;
  config.num_kv_heads = 4;
  EXPECT_THAT(PlanScratch(config, Options(2)), StatusIs(absl::StatusCode::kInvalidArgument));
  config = Preset("tiny");
  config.head_dim = kernels::kMaxDecodeHeadDim + 16;
  EXPECT_THAT(PlanScratch(config, Options(2)), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ForwardScratchTest, MoeCapacityHoldsEveryRowAPeerCanGet) {
  // One rank: every entry, in expert order.
  EXPECT_EQ(MoeExchangeFor(10, 2, 8, 1).capacity, 20);
  EXPECT_EQ(MoeExchangeFor(10, 2, 8, 1).total_rows, 20);
  // 8 experts over 4 ranks (2 each), top-2: both of a row's experts may be one peer's.
  const MoeExchange four = MoeExchangeFor(10, 2, MaxLocalExperts(8, 4), 4);
  EXPECT_EQ(four.capacity, 20);
  EXPECT_EQ(four.groups, 4);
  EXPECT_EQ(four.total_rows, 80);
  // One expert per rank: a row sends a peer at most one entry.
  EXPECT_EQ(MoeExchangeFor(10, 2, MaxLocalExperts(8, 8), 8).capacity, 10);
  EXPECT_EQ(MaxLocalExperts(10, 4), 3);
  EXPECT_GE(four.max_tiles, (80 + 31) / 32);
}

TEST(ForwardScratchTest, RegionsAreAlignedAndInOrder) {
  for (const char* preset : {"tiny", "tiny-moe"}) {
    for (int world : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << preset << " world " << world);
      const engine::ModelConfig config = Preset(preset);
      absl::StatusOr<ScratchLayout> l = PlanScratch(config, Options(2, world));
      ASSERT_THAT(l, IsOk());
      std::vector<size_t> offsets = {l->input, l->h,     l->normed,         l->qkv,
                                     l->attn,  l->delta, l->decode_scratch, l->final_rows,
                                     l->logits};
      for (size_t i = 0; i < offsets.size(); ++i) {
        EXPECT_EQ(offsets[i] % 256, 0u) << i;
        if (i > 0) EXPECT_GT(offsets[i], offsets[i - 1]) << i;
      }
      EXPECT_GE(l->input_bytes, LayoutStep(l->max_step).bytes);
      EXPECT_GE(l->normed - l->h, 100u * config.hidden_size * 2);
      EXPECT_GE(l->bytes, l->logits + 32u * config.vocab_size * 4);
      if (!config.is_moe()) {
        EXPECT_GT(l->gate_up, 0u);
        EXPECT_EQ(l->x_send, 0u);
        continue;
      }
      EXPECT_EQ(l->gate_up, 0u);  // every layer is MoE
      EXPECT_EQ(l->max_exchange.capacity, world == 1 ? 200 : 200);
      const size_t space = static_cast<size_t>(l->max_exchange.total_rows) * config.hidden_size * 2;
      if (world == 1) {
        EXPECT_EQ(l->x_recv, l->x_send);
        EXPECT_EQ(l->y_back, l->y);
      } else {
        EXPECT_GE(l->x_recv - l->x_send, space);
        EXPECT_GE(l->y_back - l->y, space);
      }
    }
  }
}

TEST(ForwardScratchTest, F32ActivationsTakeTwiceTheBytes) {
  const engine::ModelConfig config = Preset("tiny");
  absl::StatusOr<ScratchLayout> bf16 = PlanScratch(config, Options(2));
  absl::StatusOr<ScratchLayout> f32 = PlanScratch(config, Options(4));
  ASSERT_THAT(bf16, IsOk());
  ASSERT_THAT(f32, IsOk());
  EXPECT_GE(f32->normed - f32->h, 2 * (bf16->normed - bf16->h) - 256);
  EXPECT_GT(f32->bytes, bf16->bytes);
}

// The DeepSeek-V3 family plans MLA's buffers (the latent vector, the f32 latent-space
// queries and sums), an attention output of heads * v_head_dim, and room for the shared
// experts beside the dense MLP; a latent vector the kernels cannot cache is refused by
// name.
TEST(ForwardScratchTest, PlansTheDeepSeekV3Family) {
  const engine::ModelConfig config = Preset("tiny-dsv3");
  ASSERT_TRUE(config.mla);
  const absl::StatusOr<ScratchLayout> dsv3 = PlanScratch(config, Options(2));
  ASSERT_THAT(dsv3, IsOk());
  const engine::MlaDims& d = config.mla_dims;
  const size_t rows = Options(2).max_rows;
  EXPECT_GE(dsv3->mla_q_lat - dsv3->mla_kv, rows * d.latent_dim() * 2);
  EXPECT_GE(dsv3->mla_acc - dsv3->mla_q_lat,
            rows * config.num_heads * 2 * config.cache_head_dim() * sizeof(float));
  EXPECT_GT(dsv3->shared_out, 0u);
  EXPECT_GT(dsv3->router_logits, 0u);
  engine::ModelConfig odd = config;
  odd.mla_dims.kv_lora_rank += 1;
  const absl::StatusOr<ScratchLayout> refused = PlanScratch(odd, Options(2));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_NE(refused.status().message().find("kv_lora_rank"), std::string::npos)
      << refused.status();
}

TEST(ForwardScratchTest, RefusesImpossibleSizes) {
  const engine::ModelConfig config = Preset("tiny-moe");
  ScratchOptions o = Options(2);
  o.max_rows = 0;
  EXPECT_THAT(PlanScratch(config, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options(3);
  EXPECT_THAT(PlanScratch(config, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Options(2, 16);  // 8 experts over 16 ranks
  EXPECT_THAT(PlanScratch(config, o), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockstep::cuda

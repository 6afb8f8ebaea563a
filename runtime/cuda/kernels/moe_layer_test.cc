// GPU check of a whole MoE layer built from the kernels (route, permute, gather,
// per-expert gate_up GEMMs, SiLU·mul, down GEMMs, combine) against the CPU engine's
// MoeBlock::Forward with one rank, in f32 on the same bf16-rounded inputs and weights
// (relative L2 <= 1e-2). The router logits are the CPU's (f32) for both. Skips without a
// GPU (gpu_test_env.h).
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/cuda/kernels/elementwise_kernels.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/cuda/kernels/moe_expert_gemm.h"
#include "runtime/cuda/kernels/moe_kernels.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/moe.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"

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

struct MoeShape {
  int num_experts, k, hidden, width, rows;
  bool renormalize;
};

void RunLayer(const MoeShape& s, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message()
               << s.num_experts << " experts, top " << s.k << ", hidden " << s.hidden << ", width "
               << s.width << ", " << s.rows << " rows");
  engine::ModelConfig config;
  config.hidden_size = s.hidden;
  config.num_layers = 1;
  config.num_experts = s.num_experts;
  config.moe_layer.assign(1, true);  // ModelConfig's contract: one entry per layer
  config.num_experts_per_tok = s.k;
  config.moe_intermediate_size = s.width;
  config.norm_topk_prob = s.renormalize;
  engine::MoeWeights weights;
  const std::vector<float> router = RandomBf16Floats(rng, s.num_experts * s.hidden, 0.3f);
  weights.router = engine::PackedMatrix::Pack(router, s.num_experts, s.hidden);
  weights.local = {0, s.num_experts};
  std::vector<std::unique_ptr<DeviceArray<Bf16>>> device_weights;
  std::vector<const Bf16*> gate_up_ptrs, down_ptrs;
  for (int e = 0; e < s.num_experts; ++e) {
    const std::vector<float> gate_up = RandomBf16Floats(rng, 2 * s.width * s.hidden, 0.1f);
    const std::vector<float> down = RandomBf16Floats(rng, s.hidden * s.width, 0.1f);
    weights.experts.push_back(
        {.width = s.width,
         .gate_up = engine::PackedMatrix::Pack(gate_up, 2 * s.width, s.hidden),
         .down = engine::PackedMatrix::Pack(down, s.hidden, s.width)});
    device_weights.push_back(std::make_unique<DeviceArray<Bf16>>(ToBf16(gate_up)));
    gate_up_ptrs.push_back(device_weights.back()->get());
    device_weights.push_back(std::make_unique<DeviceArray<Bf16>>(ToBf16(down)));
    down_ptrs.push_back(device_weights.back()->get());
  }
  const std::vector<float> x = RandomBf16Floats(rng, s.rows * s.hidden);

  // The CPU layer, and its router logits for the device route.
  engine::Arena arena;
  std::vector<float> ref(s.rows * s.hidden);
  const engine::MoeBlock block(config, "target", engine::ExpertGroup{});
  ASSERT_TRUE(block.Forward(0, weights, x.data(), s.rows, ref.data(), arena, nullptr).ok());
  std::vector<float> logits(s.rows * s.num_experts);
  engine::Gemm(x.data(), s.rows, s.hidden, weights.router, nullptr, logits.data(), s.num_experts,
               nullptr);

  const int entries = s.rows * s.k;
  DeviceArray<float> dlogits(logits), dgates(entries);
  DeviceArray<int32_t> dexperts(entries), doffsets(s.num_experts + 1), dentry(entries),
      dslot(entries);
  DeviceArray<Bf16> dx(ToBf16(x)), dx_perm(entries * s.hidden), dgate_up(entries * 2 * s.width),
      dact(entries * s.width), dy_perm(entries * s.hidden), dout(s.rows * s.hidden);
  for (DeviceArray<Bf16>* buffer : {&dx_perm, &dgate_up, &dact, &dy_perm, &dout}) {
    ASSERT_EQ(buffer->Poison(), cudaSuccess);
  }
  ASSERT_EQ(LaunchMoeRoute(dlogits.get(), s.rows, s.num_experts, s.k, s.renormalize, dexperts.get(),
                           dgates.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(LaunchMoePermute(dexperts.get(), entries, s.num_experts, doffsets.get(), dentry.get(),
                             dslot.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(LaunchMoeGather(dx.get(), s.hidden, dentry.get(), entries, s.k, dx_perm.get(), nullptr),
            cudaSuccess);
  const std::vector<int32_t> offsets = doffsets.Download();  // synchronous
  absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::Create(nullptr, {});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  ASSERT_TRUE(GroupedExpertGemm(**gemm, dx_perm.get(), offsets, gate_up_ptrs, 2 * s.width, s.hidden,
                                dgate_up.get())
                  .ok());
  ASSERT_EQ(LaunchSiluMul(dgate_up.get(), dgate_up.get() + s.width, 2 * s.width, entries, s.width,
                          dact.get(), s.width, nullptr),
            cudaSuccess);
  ASSERT_TRUE(
      GroupedExpertGemm(**gemm, dact.get(), offsets, down_ptrs, s.hidden, s.width, dy_perm.get())
          .ok());
  ASSERT_EQ(LaunchMoeCombine(dy_perm.get(), s.hidden, dslot.get(), dgates.get(), s.rows, s.k,
                             dout.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = ToFloat(dout.Download());
  ASSERT_FALSE(HasNaN(got));
  EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), 1e-2);
}

TEST(MoeLayerTest, MatchesCpuMoeBlock) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  // mixtral-like (no renormalisation in the config here), qwen-moe-like, one row.
  RunLayer(
      {.num_experts = 8, .k = 2, .hidden = 256, .width = 448, .rows = 37, .renormalize = false},
      rng);
  RunLayer({.num_experts = 60, .k = 4, .hidden = 128, .width = 88, .rows = 70, .renormalize = true},
           rng);
  RunLayer({.num_experts = 16, .k = 4, .hidden = 64, .width = 40, .rows = 1, .renormalize = true},
           rng);
}

}  // namespace
}  // namespace lockstep::cuda::kernels

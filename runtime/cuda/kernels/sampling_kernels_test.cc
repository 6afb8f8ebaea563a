// GPU checks of on-device sampling against the CPU sampler (runtime/engine/cpu/sampler.h):
// the same logits and parameters give the same token, for greedy rows, top-k, top-k with
// top-p, top-p over a small vocabulary, and plain temperature sampling over a small
// vocabulary; ties go to the lower id. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/sampling_kernels.h"

#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/sampler.h"
#include "scheduler/sampling_params.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using testing::DeviceArray;
using testing::RandomBf16Floats;

TEST(SamplingKernelsTest, SameTokensAsCpuSampler) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int vocab : {7, 200, 32000, 151936}) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab);
    const int rows = 64;
    std::vector<float> logits = RandomBf16Floats(rng, static_cast<size_t>(rows) * vocab, 3.0f);
    // Row 0: a tie for the top logit (the lower id wins a greedy pick).
    logits[vocab - 1] = logits[1] = 50.0f;
    std::vector<SampleRowParams> params(rows);
    std::vector<int32_t> want(rows);
    engine::Arena arena;
    for (int r = 0; r < rows; ++r) {
      sched::SamplingParams sp;
      switch (r % 5) {
        case 0:  // greedy
          break;
        case 1:
          sp.temperature = 0.7f;
          sp.top_k = 1 + static_cast<int32_t>(rng() % 64);
          break;
        case 2:
          sp.temperature = 1.3f;
          sp.top_k = 200;
          sp.top_p = 0.8f;
          break;
        case 3:  // top-p alone: on the device only when the vocabulary is small
          sp.temperature = 1.0f;
          sp.top_p = 0.9f;
          break;
        case 4:  // plain temperature: likewise
          sp.temperature = 0.9f;
          break;
      }
      sp.seed = rng();
      const int64_t position = static_cast<int64_t>(rng() % 10000);
      params[r] = {.temperature = sp.temperature,
                   .top_k = sp.top_k,
                   .top_p = sp.top_p,
                   .seed = sp.seed,
                   .position = position};
      arena.Reset();
      want[r] = engine::SampleToken(logits.data() + static_cast<size_t>(r) * vocab, vocab, sp,
                                    position, arena);
      const bool on_device =
          sp.greedy() || (sp.top_k > 0 && sp.top_k < vocab ? sp.top_k : vocab) <= kMaxDeviceTopK;
      if (!on_device) want[r] = -1;
    }
    DeviceArray<float> dlogits(logits);
    DeviceArray<SampleRowParams> dparams(params);
    DeviceArray<int32_t> dtokens(rows), dargmax(rows);
    ASSERT_EQ(dtokens.Poison(), cudaSuccess);
    ASSERT_EQ(dargmax.Poison(), cudaSuccess);
    ASSERT_EQ(
        LaunchSampleTopKTopP(dlogits.get(), rows, vocab, dparams.get(), dtokens.get(), nullptr),
        cudaSuccess);
    ASSERT_EQ(LaunchArgMax(dlogits.get(), rows, vocab, dargmax.get(), nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(dtokens.Download(), want);
    const std::vector<int32_t> argmax = dargmax.Download();
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(argmax[r], engine::ArgMax(logits.data() + static_cast<size_t>(r) * vocab, vocab))
          << "row " << r;
    }
    EXPECT_EQ(argmax[0], 1);
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

// The DeepSeek-V3 family through the whole CPU engine (make-model's tiny-dsv3 preset:
// MLA over the latent cache, grouped sigmoid routing, shared experts): DEP4, four
// expert-parallel engines in lockstep with different block sizes, prefill chunks and
// batch sizes, drafting with the model itself (draft KV in a second latent pool), one
// of them with no requests at all, against one engine serving everything with plain
// decoding: the same tokens and bitwise the same log-probabilities, and every pool
// block returned.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostOptions;
using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;

std::vector<HostRequest> Requests(int n, int first_id, std::mt19937_64& rng) {
  std::vector<HostRequest> requests;
  for (int i = 0; i < n; ++i) {
    HostRequest request;
    request.id = first_id + i;
    request.prompt.push_back(kByteBosToken);
    const int length = 4 + static_cast<int>(rng() % 40);
    for (int t = 1; t < length; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 256));
    request.sampling.max_tokens = 8 + static_cast<int32_t>(rng() % 8);
    request.sampling.logprobs = 1;
    request.sampling.ignore_eos = true;
    if (i % 2 == 1) {
      request.sampling.temperature = 0.7f;
      request.sampling.seed = rng();
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

TEST(DeepseekEngineTest, FourRankEnginesEqualOneRankEngine) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-dsv3");
  const int k = 2;
  const int per_rank[kRanks] = {3, 2, 0, 2};
  std::vector<std::vector<HostRequest>> requests(kRanks);
  for (int r = 0; r < kRanks; ++r) requests[r] = Requests(per_rank[r], 1000 * (r + 1), rng);

  TestEngine solo = MakeTestEngine({.model_dir = dir, .pool_seed = seed});
  MiniHost solo_host(solo.engine.get(), solo.target.get(), nullptr,
                     {.chunk_size = 16, .max_batch = 4});
  for (const auto& rank_requests : requests) {
    for (const HostRequest& request : rank_requests) solo_host.Add(request);
  }
  ASSERT_THAT(solo_host.Run(), IsOk());

  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(kRanks);
  std::vector<TestEngine> engines;
  std::vector<std::unique_ptr<MiniHost>> hosts;
  for (int r = 0; r < kRanks; ++r) {
    engines.push_back(MakeTestEngine({.model_dir = dir,
                                      .draft_dir = dir,  // drafts for itself
                                      .num_draft_tokens = k,
                                      .tokens_per_block = 4 + r,
                                      .communicator = group[r].get(),
                                      .rank = r,
                                      .world_size = kRanks,
                                      .pool_seed = seed + r}));
    hosts.push_back(std::make_unique<MiniHost>(engines[r].engine.get(), engines[r].target.get(),
                                               engines[r].draft.get(),
                                               HostOptions{.chunk_size = 8 + 5 * r,
                                                           .max_batch = 1 + r,
                                                           .num_draft_tokens = k,
                                                           .dummy_id = -1 - r}));
    for (const HostRequest& request : requests[r]) hosts[r]->Add(request);
  }
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 1000);
    bool all_done = true;
    for (const auto& host : hosts) all_done = all_done && host->Done();
    if (all_done) break;
    for (auto& host : hosts) ASSERT_THAT(host->Launch(/*pad=*/true), IsOk());
    for (auto& host : hosts) ASSERT_THAT(host->Collect(), IsOk());
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(hosts[r]->pools_clean());
    for (const HostRequest& request : requests[r]) {
      const HostOutput& got = hosts[r]->output(request.id);
      const HostOutput& want = solo_host.output(request.id);
      EXPECT_EQ(got.tokens, want.tokens) << "rank " << r << " request " << request.id;
      ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
      for (size_t t = 0; t < want.logprobs.size(); ++t) {
        EXPECT_EQ(got.logprobs[t][0].logprob, want.logprobs[t][0].logprob)
            << "rank " << r << " request " << request.id << " token " << t;
      }
      if (request.sampling.greedy()) {
        EXPECT_EQ(got.accepted, got.proposed) << "a model drafting for itself is always right";
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

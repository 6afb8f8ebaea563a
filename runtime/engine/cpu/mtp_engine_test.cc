// Speculative decoding with the model's own MTP layer (make-model's tiny-dsv3-mtp: a
// DeepSeek-V3-family target with one multi-token-prediction layer) through the whole
// CPU engine:
//  * DEP4: four expert-parallel engines in lockstep, each drafting with its MTP layer
//    (its MoE exchange on every rank, every step: one rank has no requests and pads),
//    with different block sizes, prefill chunks (the MTP row of a chunk's last position
//    waits for the next chunk) and batch sizes, against one engine without
//    speculation: the same tokens, bitwise the same log-probabilities (greedy and
//    seeded sampling), and every pool block returned.
//  * The module predicts the target: greedy acceptance at the first position >= 60%,
//    and more tokens per step with K = 3, and with dynamic K up to 3, than with K = 1.
//  * A model without an MTP layer is refused by name.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
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
using ::lockstep::engine::testing::RunSpec;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::SpecRun;
using ::lockstep::engine::testing::SpecRunOutput;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

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

// `ranks` expert-parallel engines drafting with MTP (K = k) against one without.
void ExpectEngineGroupEqualsPlainDecoding(int ranks, int k, const std::vector<int>& per_rank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-dsv3-mtp");
  std::vector<std::vector<HostRequest>> requests(ranks);
  for (int r = 0; r < ranks; ++r) requests[r] = Requests(per_rank[r], 1000 * (r + 1), rng);

  TestEngine solo = MakeTestEngine({.model_dir = dir, .pool_seed = seed});
  MiniHost solo_host(solo.engine.get(), solo.target.get(), nullptr,
                     {.chunk_size = 16, .max_batch = 4});
  for (const auto& rank_requests : requests) {
    for (const HostRequest& request : rank_requests) solo_host.Add(request);
  }
  ASSERT_THAT(solo_host.Run(), IsOk());

  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(ranks);
  std::vector<TestEngine> engines;
  std::vector<std::unique_ptr<MiniHost>> hosts;
  for (int r = 0; r < ranks; ++r) {
    engines.push_back(MakeTestEngine({.model_dir = dir,
                                      .num_draft_tokens = k,
                                      .spec_method = spec::Method::kMtp,
                                      .tokens_per_block = 4 + r,
                                      .communicator = group[r].get(),
                                      .rank = r,
                                      .world_size = ranks,
                                      .pool_seed = seed + r}));
    ASSERT_NE(engines[r].draft, nullptr);
    hosts.push_back(std::make_unique<MiniHost>(engines[r].engine.get(), engines[r].target.get(),
                                               engines[r].draft.get(),
                                               HostOptions{.chunk_size = 8 + 5 * r,
                                                           .max_batch = 1 + r,
                                                           .num_draft_tokens = k,
                                                           .spec_method = spec::Method::kMtp,
                                                           .dummy_id = -1 - r}));
    for (const HostRequest& request : requests[r]) hosts[r]->Add(request);
  }
  int64_t proposed = 0;
  int64_t accepted = 0;
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 1000);
    bool all_done = true;
    for (const auto& host : hosts) all_done = all_done && host->Done();
    if (all_done) break;
    for (auto& host : hosts) ASSERT_THAT(host->Launch(/*pad=*/true), IsOk());
    for (auto& host : hosts) ASSERT_THAT(host->Collect(), IsOk());
  }
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(hosts[r]->pools_clean()) << "rank " << r;
    for (const HostRequest& request : requests[r]) {
      const HostOutput& got = hosts[r]->output(request.id);
      const HostOutput& want = solo_host.output(request.id);
      EXPECT_EQ(got.tokens, want.tokens) << "rank " << r << " request " << request.id;
      ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
      for (size_t t = 0; t < want.logprobs.size(); ++t) {
        EXPECT_EQ(got.logprobs[t][0].logprob, want.logprobs[t][0].logprob)
            << "rank " << r << " request " << request.id << " token " << t;
      }
      proposed += got.proposed;
      accepted += got.accepted;
    }
  }
  EXPECT_GT(proposed, 0) << "MTP proposed nothing";
  EXPECT_GT(accepted, 0) << "MTP's drafts were never accepted";
}

TEST(MtpEngineTest, FourRankEnginesWithMtpEqualOneRankWithout) {
  ExpectEngineGroupEqualsPlainDecoding(4, 2, {3, 2, 0, 2});
}

TEST(MtpEngineTest, TwoRankEnginesWithMtpEqualOneRankWithout) {
  ExpectEngineGroupEqualsPlainDecoding(2, 3, {3, 2});
}

TEST(MtpEngineTest, TheModulePredictsTheTarget) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny-dsv3-mtp");
  const std::vector<HostRequest> prompts = SpecPrompts(8, seed, 32, /*stochastic=*/false);
  const SpecRunOutput plain = RunSpec(dir, SpecRun{}, prompts, seed);
  int64_t tokens = 0;
  for (const auto& t : plain.tokens) tokens += static_cast<int64_t>(t.size());
  // Tokens per generation step, summed over requests (docs/perf.md "## MTP").
  std::printf("plain: %.3f tokens/step\n",
              static_cast<double>(tokens) / static_cast<double>(plain.steps));
  std::vector<int64_t> steps;
  for (int k = 1; k <= 3; ++k) {
    const SpecRunOutput run = RunSpec(dir, {.method = spec::Method::kMtp, .k = k}, prompts, seed);
    EXPECT_EQ(run.tokens, plain.tokens) << "K = " << k;
    ASSERT_GT(run.proposed, 0);
    const double acceptance =
        static_cast<double>(run.accepted) / static_cast<double>(run.proposed);
    std::printf("MTP K=%d: %.3f tokens/step, acceptance %lld / %lld = %.3f\n", k,
                static_cast<double>(tokens) / static_cast<double>(run.steps),
                static_cast<long long>(run.accepted), static_cast<long long>(run.proposed),
                acceptance);
    if (k == 1) {
      EXPECT_GE(acceptance, 0.6) << "acceptance at the first position";
    }
    steps.push_back(run.steps);
  }
  EXPECT_LT(steps[2], steps[0]) << "K = 3 takes fewer steps than K = 1";
  // Dynamic K (at most 3): each request's K follows its own acceptance.
  const SpecRunOutput dynamic =
      RunSpec(dir, {.method = spec::Method::kMtp, .k = 3, .dynamic = true}, prompts, seed);
  EXPECT_EQ(dynamic.tokens, plain.tokens) << "dynamic K";
  ASSERT_GT(dynamic.proposed, 0);
  std::printf("MTP K=3 dynamic: %.3f tokens/step, acceptance %lld / %lld = %.3f\n",
              static_cast<double>(tokens) / static_cast<double>(dynamic.steps),
              static_cast<long long>(dynamic.accepted), static_cast<long long>(dynamic.proposed),
              static_cast<double>(dynamic.accepted) / static_cast<double>(dynamic.proposed));
  EXPECT_LT(dynamic.steps, steps[0]) << "dynamic K (at most 3) takes fewer steps than K = 1";
}

TEST(MtpEngineTest, AModelWithoutAnMtpLayerIsRefused) {
  const std::string dir = PresetModelDir("tiny-dsv3");
  const spec::SpeculativeConfig mtp{.method = spec::Method::kMtp, .num_draft_tokens = 2};
  const absl::StatusOr<kv::BlockLayout> layout = DraftBlockLayout(mtp, dir, "", 8);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("num_nextn_predict_layers is 0"), std::string::npos)
      << layout.status();
}

}  // namespace
}  // namespace lockstep::engine

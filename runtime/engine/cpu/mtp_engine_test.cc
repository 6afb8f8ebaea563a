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
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/rank_group_run.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::Members;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RequestsPerRank;
using ::lockstep::engine::testing::RunRankGroupAgainstOneEngine;
using ::lockstep::engine::testing::RunSpec;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::SpecRun;
using ::lockstep::engine::testing::SpecRunOutput;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// `ranks` expert-parallel engines drafting with MTP (K = k) against one without.
void ExpectEngineGroupEqualsPlainDecoding(int ranks, int k, const std::vector<int>& per_rank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::vector<HostRequest>> requests =
      RequestsPerRank(per_rank, /*prompt_spread=*/40, /*min_tokens=*/8, rng);
  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(ranks);
  std::vector<std::vector<HostOutput>> outputs;
  ASSERT_NO_FATAL_FAILURE(
      RunRankGroupAgainstOneEngine({.model_dir = PresetModelDir("tiny-dsv3-mtp"),
                                    .spec_method = spec::Method::kMtp,
                                    .num_draft_tokens = k,
                                    .seed = seed},
                                   Members(group), requests, outputs));
  int64_t proposed = 0;
  int64_t accepted = 0;
  for (const std::vector<HostOutput>& rank_outputs : outputs) {
    for (const HostOutput& got : rank_outputs) {
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
    const double acceptance = static_cast<double>(run.accepted) / static_cast<double>(run.proposed);
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

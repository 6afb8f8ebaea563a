// Live rebalancing on 4 in-process ranks (tiny-moe): a placement planned at one window's
// end is loaded in the background and adopted at the next window's end by every rank,
// and the logits stay bitwise equal to the single-rank model's before, during and after;
// a load that fails on one rank aborts the rebalance on all of them.
#include "runtime/engine/cpu/expert_rebalance.h"

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/prefill_logits.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::PrefillLogits;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;

// Runs `rounds` forwards on the 4 ranks, checking each against the single-rank model.
// `failing_rank`: that rank's loader fails (-1: none). Returns the rebalancers (owned
// by `ranks`, which use `group`).
std::vector<const ExpertRebalancer*> RunRounds(
    int rounds, int failing_rank, uint64_t seed,
    std::vector<std::unique_ptr<comm::Communicator>>& group,
    std::vector<std::unique_ptr<Transformer>>& ranks) {
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-moe");
  auto single = std::move(Transformer::Load(dir, "target", ExpertGroup{})).value();
  group = comm::MakeInProcessGroup(kRanks);
  std::vector<const ExpertRebalancer*> rebalancers;
  ranks.clear();
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::move(Transformer::Load(
                                  dir, "target",
                                  ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(30)}))
                        .value());
    Transformer& model = *ranks.back();
    const ModelConfig& config = model.config();
    model.OwnExpertLoad(std::make_unique<ExpertLoad>(config.num_layers, config.num_experts,
                                                     /*window=*/1, group[r].get(),
                                                     absl::Seconds(30), "target"));
    ExpertLoader loader = CheckpointExpertLoader(dir, config, r);
    if (r == failing_rank) {
      loader = [](const eplb::Placement&, const LayerMoeWeights&)
          -> absl::StatusOr<LayerMoeWeights> { return absl::DataLossError("disk gone"); };
    }
    auto rebalancer = std::make_unique<ExpertRebalancer>(
        config, eplb::ContiguousPlacement(config.num_experts, kRanks, config.num_layers),
        model.LoadedMoeWeights(),
        RebalanceOptions{.every_windows = 2,
                         .plan = {.num_ranks = kRanks, .redundant_per_rank = 1}},
        group[r].get(), r, absl::Seconds(30), "target", std::move(loader));
    rebalancers.push_back(rebalancer.get());
    model.OwnRebalancer(std::move(rebalancer));
  }
  HostPool single_pool(single->Layout(8), 128, seed);
  std::vector<std::unique_ptr<HostPool>> pools;
  for (int r = 0; r < kRanks; ++r) {
    pools.push_back(std::make_unique<HostPool>(single->Layout(8), 128, seed + r));
  }
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<std::vector<int32_t>>> prompts(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (int s = 0; s < (round + r) % 3; ++s) {
        std::vector<int32_t> tokens(1 + rng() % 20);
        for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
        prompts[r].push_back(tokens);
      }
    }
    std::vector<std::vector<float>> logits(kRanks);
    std::vector<absl::Status> status(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back(
          [&, r] { status[r] = PrefillLogits(*ranks[r], *pools[r], prompts[r], logits[r]); });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_THAT(status[r], IsOk()) << "round " << round << " rank " << r;
      std::vector<float> expected;
      EXPECT_THAT(PrefillLogits(*single, single_pool, prompts[r], expected), IsOk());
      EXPECT_EQ(logits[r], expected) << "round " << round << " rank " << r;
    }
  }
  return rebalancers;
}

TEST(ExpertRebalanceTest, AdoptsAtTheNextWindowWithEqualLogits) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  // Windows of one forward, planned every second window: planned at the end of forward
  // 2, adopted at the end of forward 3; forward 4 runs on the new placement (and plans
  // again: that load is still in flight at the end).
  const auto rebalancers = RunRounds(4, /*failing_rank=*/-1, seed, group, ranks);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(rebalancers[r]->adopted(), 1) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->aborted(), 0) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->placement(), rebalancers[0]->placement()) << "rank " << r;
    for (const auto& slots : rebalancers[r]->placement().layers[0].slots) {
      EXPECT_EQ(slots.size(), 3u);  // 2 experts + 1 redundant slot per rank
    }
  }
}

TEST(ExpertRebalanceTest, AFailedLoadAbortsOnEveryRank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  const auto rebalancers = RunRounds(4, /*failing_rank=*/2, seed, group, ranks);
  const eplb::Placement contiguous = eplb::ContiguousPlacement(8, kRanks, 4);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(rebalancers[r]->adopted(), 0) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->aborted(), 1) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->placement(), contiguous) << "rank " << r;
  }
}

}  // namespace
}  // namespace lockstep::engine

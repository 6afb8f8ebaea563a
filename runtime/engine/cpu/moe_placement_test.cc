// Expert placements with replicas (runtime/eplb): the sharded model on 2 and 4
// in-process ranks, with the contiguous sharding and with planned placements that
// replicate experts, gives logits bitwise equal to the single-rank model; the expert
// load it measures is the same on every rank and adds up; a bad layout is refused.
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
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/testing/prefill_logits.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/eplb/placement.h"
#include "runtime/eplb/plan.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::PrefillLogits;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

ExpertLayout ToLayout(const eplb::Placement& placement) {
  ExpertLayout layout;
  for (const eplb::LayerPlacement& layer : placement.layers) layout.push_back(layer.slots);
  return layout;
}

// A placement of tiny-moe's 8 experts on `ranks` ranks with `redundant` extra slots
// each, planned for loads where expert 3 (and in odd layers expert 6) is hot.
eplb::Placement SkewedPlacement(int ranks, int redundant) {
  std::vector<std::vector<double>> loads(4, std::vector<double>(8, 10.0));
  for (int l = 0; l < 4; ++l) loads[l][l % 2 == 0 ? 3 : 6] = 200.0;
  auto plan = eplb::Plan(loads, {.num_ranks = ranks, .redundant_per_rank = redundant});
  LOCKSTEP_CHECK_OK(plan.status());
  return *plan;
}

void ExpectPlacementMatchesSingleRank(int world, const eplb::Placement& placement,
                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-moe");
  auto single = std::move(Transformer::Load(dir, "target", ExpertGroup{})).value();
  auto group = comm::MakeInProcessGroup(world);
  std::vector<std::unique_ptr<Transformer>> ranks;
  std::vector<std::unique_ptr<ExpertLoad>> loads;
  for (int r = 0; r < world; ++r) {
    auto model = Transformer::Load(dir, "target",
                                   ExpertGroup{group[r].get(), r, world, absl::Seconds(30)},
                                   ToLayout(placement));
    ASSERT_THAT(model.status(), IsOk());
    ranks.push_back(std::move(model).value());
    loads.push_back(std::make_unique<ExpertLoad>(4, 8, /*window=*/2, group[r].get(),
                                                 absl::Seconds(30), "target"));
    ranks.back()->set_expert_load(loads.back().get());
  }
  HostPool single_pool(single->Layout(8), 128, seed);
  std::vector<std::unique_ptr<HostPool>> pools;
  for (int r = 0; r < world; ++r) {
    pools.push_back(std::make_unique<HostPool>(single->Layout(8), 128, seed + r));
  }
  int64_t rows_in_window = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<std::vector<std::vector<int32_t>>> prompts(world);
    for (int r = 0; r < world; ++r) {
      for (int s = 0; s < (round + r) % 3; ++s) {  // some ranks have no rows
        std::vector<int32_t> tokens(1 + rng() % 20);
        for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
        prompts[r].push_back(tokens);
        if (round >= 2) rows_in_window += static_cast<int64_t>(tokens.size());
      }
    }
    std::vector<std::vector<float>> logits(world);
    std::vector<absl::Status> status(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back(
          [&, r] { status[r] = PrefillLogits(*ranks[r], *pools[r], prompts[r], logits[r]); });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_THAT(status[r], IsOk()) << "rank " << r;
      std::vector<float> expected;
      ASSERT_THAT(PrefillLogits(*single, single_pool, prompts[r], expected), IsOk());
      ASSERT_EQ(logits[r], expected) << "round " << round << " rank " << r;
    }
  }
  // Two windows of two forwards: the latest is rounds 2 and 3, the same on every rank.
  const ExpertLoadSnapshot snapshot = loads[0]->Latest();
  EXPECT_EQ(snapshot.windows, 2);
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(loads[r]->Latest().routed, snapshot.routed) << "rank " << r;
    EXPECT_EQ(loads[r]->Latest().computed, snapshot.computed) << "rank " << r;
  }
  for (int l = 0; l < 4; ++l) {
    int64_t routed = 0, computed = 0;
    for (int e = 0; e < 8; ++e) routed += snapshot.routed[l * 8 + e];
    for (int r = 0; r < world; ++r) computed += snapshot.computed[l * world + r];
    EXPECT_EQ(routed, 2 * rows_in_window) << "layer " << l;  // k = 2
    EXPECT_EQ(computed, routed) << "layer " << l;
  }
}

TEST(MoePlacementTest, ReplicatedPlacementsEqualSingleRankBitwise) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  for (int world : {2, 4}) {
    for (int redundant : {0, 1, 2}) {
      SCOPED_TRACE(::testing::Message() << "DEP" << world << ", " << redundant << " redundant");
      const eplb::Placement placement = SkewedPlacement(world, redundant);
      ASSERT_THAT(eplb::Validate(placement), IsOk());
      ExpectPlacementMatchesSingleRank(world, placement, seed);
    }
  }
  // An expert on every rank, the others once.
  eplb::Placement everywhere{8, 4, {}};
  everywhere.layers.assign(4, eplb::LayerPlacement{{{0, 1, 3}, {2, 3}, {3, 4, 5}, {3, 6, 7}}});
  ASSERT_THAT(eplb::Validate(everywhere), IsOk());
  ExpectPlacementMatchesSingleRank(4, everywhere, seed);
}

TEST(MoePlacementTest, BadLayoutIsRefused) {
  const std::string dir = PresetModelDir("tiny-moe");
  auto group = comm::MakeInProcessGroup(2);
  ExpertLayout three_ranks(4, {{0, 1, 2}, {3, 4, 5}, {6, 7}});
  EXPECT_THAT(Transformer::Load(dir, "target", ExpertGroup{group[0].get(), 0, 2}, three_ranks)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names 3 ranks, not 2")));
  ExpertLayout bad_expert(4, {{0, 1, 2, 3}, {4, 5, 6, 9}});
  EXPECT_THAT(Transformer::Load(dir, "target", ExpertGroup{group[0].get(), 0, 2}, bad_expert)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names expert 9 of 8")));
}

}  // namespace
}  // namespace lockstep::engine

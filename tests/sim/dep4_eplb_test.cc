// Expert-parallel load balancing in the simulator (runtime/sim/expert_exchange.h): the
// small-batch DEP4 generation workload with the expert exchange of a skewed MoE around
// every rank's engine, placements planned every other load window and adopted at the
// next, under injected vetoes and with both dummy policies (pad dummies run forwards
// too). Every request completes with the right tokens, every rank adopts the same
// placements at the same steps (the run's violations say otherwise), and the windows
// after an adoption are balanced; with one rank's weight loads failing, every rebalance
// is aborted on every rank and the placement stays.
#include "gtest/gtest.h"
#include "runtime/sim/scenarios.h"
#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {
namespace {

// `failing_rank`: that rank's weight loads always fail (-1: none).
SimConfig Config(sched::DummyPolicy policy, uint64_t seed, int failing_rank) {
  SimConfig c = Dep4SmallBatch(3, policy, seed, /*num_requests=*/400);
  c.eplb.enabled = true;
  c.eplb.window = 8;
  c.eplb.rebalance_windows = 2;
  c.eplb.redundant_slots = 1;
  c.eplb.hot_share = 0.8;
  c.eplb.failing_rank = failing_rank;
  // Vetoes: a rank reports an empty batch, so no rank runs that forward.
  for (int i = 0; i < 6; ++i) {
    c.faults.push_back({.kind = SimFault::Kind::kVeto, .rank = 1 + i % 3, .step = 40 + 57 * i});
  }
  return c;
}

class Dep4EplbTest : public ::testing::TestWithParam<sched::DummyPolicy> {};

TEST_P(Dep4EplbTest, EveryRankAdoptsTheSamePlacementsAtTheSameSteps) {
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    const SimConfig config = Config(GetParam(), seed, -1);
    const SimSummary summary = RunSimulation(config);
    ASSERT_TRUE(summary.ok()) << config.ToString() << "\n" << summary.ToString();
    EXPECT_EQ(summary.completed, 400) << config.ToString();
    EXPECT_GT(summary.vetoed_steps, 0) << summary.ToString();
    EXPECT_GT(summary.padded_steps, 0) << summary.ToString();
    EXPECT_GE(summary.eplb.adopted, 1) << "seed " << seed;
    EXPECT_EQ(summary.eplb.aborted, 0) << "seed " << seed;
    EXPECT_GE(summary.eplb.first_window_imbalance, 1.5) << "seed " << seed;
    EXPECT_LE(summary.eplb.imbalance_after_rebalance, 1.3) << "seed " << seed;
  }
}

TEST_P(Dep4EplbTest, OneRanksFailedLoadsAbortEveryRebalanceEverywhere) {
  const SimConfig config = Config(GetParam(), 3, /*failing_rank=*/2);
  const SimSummary summary = RunSimulation(config);
  ASSERT_TRUE(summary.ok()) << config.ToString() << "\n" << summary.ToString();
  EXPECT_EQ(summary.completed, 400);
  EXPECT_EQ(summary.eplb.adopted, 0);
  EXPECT_GE(summary.eplb.aborted, 1);
  EXPECT_GE(summary.eplb.imbalance_after_rebalance, 1.5);
}

INSTANTIATE_TEST_SUITE_P(DummyPolicies, Dep4EplbTest,
                         ::testing::Values(sched::DummyPolicy::kCompat,
                                           sched::DummyPolicy::kReserved),
                         [](const auto& info) { return sched::DummyPolicyName(info.param); });

}  // namespace
}  // namespace lockstep::sim

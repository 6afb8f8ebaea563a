// The small-batch DEP4 workload (the motivating deployment's shape, docs/design.md §1):
// DEP4 generation instance, generation-only requests with transfer latency, K = 3 with
// an unpaired draft pool, max_batch_size 2, 3, 4 and 16 per rank, 1600 requests per
// run, both dummy policies. Every request completes with the right tokens, no errors,
// every pool back to baseline, audit clean at every step.
//
// CI runs LOCKSTEP_DEP4_SEEDS seeds per (batch size, policy) (default 2); the full run
// is `LOCKSTEP_DEP4_SEEDS=20 bazel test //tests/sim:dep4_small_batch_test
// --test_env=LOCKSTEP_DEP4_SEEDS=20`.
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "runtime/sim/scenarios.h"

namespace lockstep::sim {
namespace {

int Seeds() {
  int seeds = 2;
  if (const char* env = std::getenv("LOCKSTEP_DEP4_SEEDS")) {
    if (!absl::SimpleAtoi(env, &seeds) || seeds < 1) seeds = 2;
  }
  return seeds;
}

struct Param {
  int max_batch_size;
  sched::DummyPolicy policy;
};

class Dep4SmallBatchTest : public ::testing::TestWithParam<Param> {};

TEST_P(Dep4SmallBatchTest, EveryRequestCompletes) {
  const Param p = GetParam();
  for (int seed = 1; seed <= Seeds(); ++seed) {
    const SimConfig config = Dep4SmallBatch(p.max_batch_size, p.policy, seed);
    const SimSummary summary = RunSimulation(config);
    ASSERT_TRUE(summary.ok()) << config.ToString() << "\n" << summary.ToString();
    EXPECT_EQ(summary.completed, 1600) << config.ToString() << "\n" << summary.ToString();
    EXPECT_EQ(summary.failed, 0) << config.ToString();
    if (p.policy == sched::DummyPolicy::kReserved) {
      // A reserved dummy can always pad, so no rank ever vetoes the forward.
      EXPECT_EQ(summary.vetoed_steps, 0) << config.ToString() << "\n" << summary.ToString();
      EXPECT_EQ(summary.dummies_refused, 0) << config.ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BatchSizesAndPolicies, Dep4SmallBatchTest,
                         ::testing::Values(Param{2, sched::DummyPolicy::kCompat},
                                           Param{2, sched::DummyPolicy::kReserved},
                                           Param{3, sched::DummyPolicy::kCompat},
                                           Param{3, sched::DummyPolicy::kReserved},
                                           Param{4, sched::DummyPolicy::kCompat},
                                           Param{4, sched::DummyPolicy::kReserved},
                                           Param{16, sched::DummyPolicy::kCompat},
                                           Param{16, sched::DummyPolicy::kReserved}),
                         [](const auto& info) {
                           return "mbs" + std::to_string(info.param.max_batch_size) + "_" +
                                  sched::DummyPolicyName(info.param.policy);
                         });

}  // namespace
}  // namespace lockstep::sim

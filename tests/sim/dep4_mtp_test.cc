// The motivating deployment with MTP (issue: MTP speculative decoding): the seed's
// scenario (DEP4 generation instance, generation-only requests with transfer latency,
// max_batch_size 2-4 per rank, both dummy policies) with speculative.method mtp, K = 3:
// the MTP module's KV lives in a draft pool paired with the target's blocks, so every
// pad dummy, rollback and release goes through the paired mirror. Three runs in a row
// (seeds 1-3) of 1600 requests each: every request completes, none fails, every pool
// back to baseline and the audit clean at every step (SimSummary::ok).
#include <string>

#include "gtest/gtest.h"
#include "runtime/sim/scenarios.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {
namespace {

struct Param {
  int max_batch_size;
  sched::DummyPolicy policy;
};

class Dep4MtpTest : public ::testing::TestWithParam<Param> {};

TEST_P(Dep4MtpTest, ThreeRunsInARowComplete) {
  const Param p = GetParam();
  for (int seed = 1; seed <= 3; ++seed) {
    SimConfig config = Dep4SmallBatch(p.max_batch_size, p.policy, seed);
    config.scheduler.speculative = {.method = spec::Method::kMtp, .num_draft_tokens = 3};
    config.draft_mode = kv::DraftMode::kPaired;
    config.draft_num_blocks = config.num_blocks;
    const SimSummary summary = RunSimulation(config);
    ASSERT_TRUE(summary.ok()) << config.ToString() << "\n" << summary.ToString();
    EXPECT_EQ(summary.completed, 1600) << config.ToString() << "\n" << summary.ToString();
    EXPECT_EQ(summary.failed, 0) << config.ToString();
    EXPECT_NE(config.ToString().find("method=mtp"), std::string::npos) << config.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(BatchSizesAndPolicies, Dep4MtpTest,
                         ::testing::Values(Param{2, sched::DummyPolicy::kCompat},
                                           Param{2, sched::DummyPolicy::kReserved},
                                           Param{3, sched::DummyPolicy::kCompat},
                                           Param{3, sched::DummyPolicy::kReserved},
                                           Param{4, sched::DummyPolicy::kCompat},
                                           Param{4, sched::DummyPolicy::kReserved}),
                         [](const auto& info) {
                           return "mbs" + std::to_string(info.param.max_batch_size) + "_" +
                                  sched::DummyPolicyName(info.param.policy);
                         });

}  // namespace
}  // namespace lockstep::sim

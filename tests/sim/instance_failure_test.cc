// Instance failures with request migration (runtime/sim/sim_fleet.h): when every rank
// of an instance fails mid-run, the requests it held go on elsewhere as continuations
// and each ends with exactly the output of the run without the failure; failures
// beyond what migration can absorb (the limit, no live instance left) end requests
// with errors the run explains, never with wrong tokens or leaked blocks.
#include <iostream>
#include <random>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/sim/scenarios.h"
#include "runtime/sim/sim_fleet.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {
namespace {

FleetConfig Fleet(uint64_t seed, int instances, int ranks, int64_t requests) {
  FleetConfig c;
  c.sim.seed = seed;
  c.sim.ranks = ranks;
  c.sim.workload.num_requests = requests;
  c.instances = instances;
  return c;
}

TEST(InstanceFailureTest, AFailedInstancesRequestsEndElsewhereWithTheFaultFreeOutput) {
  FleetConfig c = Fleet(21, 2, 2, 120);
  const FleetSummary clean = RunFleet(c);
  ASSERT_TRUE(clean.ok()) << c.ToString() << "\n" << clean.ToString();
  EXPECT_EQ(clean.completed, 120) << clean.ToString();
  EXPECT_EQ(clean.migrations, 0);

  c.failures = {{.instance = 0, .step = clean.steps / 3}};
  const FleetSummary s = RunFleet(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.failed_instances, 1);
  EXPECT_EQ(s.completed, 120) << s.ToString();
  EXPECT_GT(s.migrated_mid_stream, 0) << "the failure caught no request in mid-stream";
  EXPECT_EQ(s.migrated_completed, s.migrations) << s.ToString();
  EXPECT_EQ(s.outputs, clean.outputs);
  std::cerr << s.ToString() << "\n";
  // The same run again is the same run.
  EXPECT_EQ(RunFleet(c).ToString(), s.ToString());
}

// Three DEP2 instances with K = 3 and an unpaired draft pool, vetoes and client
// cancels, two of the instances failing at seeded steps: no violation, and every
// request that completed in both runs has the fault-free run's output.
TEST(InstanceFailureTest, TwoFailuresWithSpeculationAndCancelsAcrossSeeds) {
  const uint64_t base = lockstep::testing::TestSeed(31);
  for (uint64_t seed = base; seed < base + 8; ++seed) {
    SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
    FleetConfig c = Fleet(seed, 3, 2, 90);
    c.sim.scheduler.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3};
    c.sim.draft_mode = kv::DraftMode::kUnpaired;
    c.sim.workload.cancel_fraction = 0.1;
    c.sim.faults = {{.kind = SimFault::Kind::kVeto, .rank = 1, .step = 7}};
    const FleetSummary clean = RunFleet(c);
    ASSERT_TRUE(clean.ok()) << c.ToString() << "\n" << clean.ToString();
    std::mt19937_64 rng(seed);
    const int64_t first = 1 + static_cast<int64_t>(rng() % (clean.steps / 2));
    const int64_t second = first + static_cast<int64_t>(rng() % (clean.steps / 2));
    c.failures = {{.instance = static_cast<int>(rng() % 3), .step = first}};
    c.failures.push_back({.instance = (c.failures[0].instance + 1) % 3, .step = second});
    const FleetSummary s = RunFleet(c);
    EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
    EXPECT_EQ(s.failed, 0) << "one instance lives and the limit allows two migrations\n"
                           << s.ToString();
    EXPECT_EQ(s.completed + s.cancelled, 90) << s.ToString();
    int64_t compared = 0;
    for (const auto& [id, tokens] : s.outputs) {
      const std::vector<int32_t>& want = clean.outputs.at(id);
      if (tokens.size() != want.size()) continue;  // cancelled in one of the runs
      ++compared;
      EXPECT_EQ(tokens, want) << "request " << id;
    }
    EXPECT_GT(compared, 60);
    std::cerr << s.ToString() << "\n";
  }
}

TEST(InstanceFailureTest, NoLiveInstanceLeftFailsTheRestWithExplainedErrors) {
  FleetConfig c = Fleet(41, 2, 2, 120);
  const FleetSummary clean = RunFleet(c);
  ASSERT_TRUE(clean.ok()) << clean.ToString();
  c.failures = {{.instance = 0, .step = clean.steps / 4},
                {.instance = 1, .step = clean.steps / 2}};
  const FleetSummary s = RunFleet(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.failed_instances, 2);
  EXPECT_GT(s.failed, 0) << s.ToString();
  EXPECT_GT(s.migrations, 0) << s.ToString();
  EXPECT_EQ(s.completed + s.failed, 120) << s.ToString();
  std::cerr << s.ToString() << "\n";
}

TEST(InstanceFailureTest, AZeroMigrationLimitFailsTheFailedInstancesRequests) {
  FleetConfig c = Fleet(51, 2, 2, 120);
  c.migration_limit = 0;
  const FleetSummary clean = RunFleet(c);
  ASSERT_TRUE(clean.ok()) << clean.ToString();
  c.failures = {{.instance = 1, .step = clean.steps / 3}};
  const FleetSummary s = RunFleet(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.migrations, 0);
  EXPECT_GT(s.failed, 0) << s.ToString();
  EXPECT_EQ(s.completed + s.failed, 120) << s.ToString();
}

// Random fleets (scenarios.h): whatever the shape, no violation; requests fail only by
// the failures (checked inside), and a fleet where one instance lives and the limit
// covers every failure completes or cancels every request.
TEST(InstanceFailureTest, RandomFleets) {
  const uint64_t base = lockstep::testing::TestSeed(1);
  int64_t migrations = 0;
  for (uint64_t seed = base; seed < base + 20; ++seed) {
    const FleetConfig c = RandomFleetConfig(seed);
    const FleetSummary s = RunFleet(c);
    EXPECT_TRUE(s.ok()) << c.ToString() << "\n"
                        << s.ToString() << "\nreplay: lockstep sim --fleet --seed " << seed;
    migrations += s.migrations;
  }
  EXPECT_GT(migrations, 0);
}

}  // namespace
}  // namespace lockstep::sim

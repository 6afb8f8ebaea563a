// The simulator with its ranks' collectives over shared memory (ShmCommunicator, ranks
// as threads) instead of the in-process communicator: the small-batch DEP4 workload, an
// aggregated run and a few random configurations replay exactly the same on both
// (the same summary, every counter, and the same outcome digest: every request's
// tokens and the step and rank that answered it), since the simulator replays exactly
// whatever carries its collectives.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/testing/thread_groups.h"
#include "runtime/sim/scenarios.h"
#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {
namespace {

absl::StatusOr<std::vector<std::unique_ptr<comm::Communicator>>> ShmGroup(int ranks) {
  return comm::testing::MakeThreadGroup(comm::testing::Transport::kShm, ranks);
}

// Runs `config` in-process and over shm; returns the shm run's outcome digest.
uint64_t ExpectSameRunOverShm(SimConfig config) {
  SCOPED_TRACE(config.ToString());
  const SimSummary in_process = RunSimulation(config);
  EXPECT_TRUE(in_process.ok()) << in_process.ToString();
  config.make_group = ShmGroup;
  const SimSummary shm = RunSimulation(config);
  EXPECT_TRUE(shm.ok()) << shm.ToString();
  EXPECT_GT(shm.completed + shm.handed_off, 0) << shm.ToString();
  EXPECT_EQ(shm.outcome_digest, in_process.outcome_digest);
  EXPECT_EQ(shm.ToString(), in_process.ToString());
  std::printf("%s\n  %s\n", config.ToString().c_str(), shm.ToString().c_str());
  return shm.outcome_digest;
}

TEST(SimShmTest, Dep4SmallBatchOverShm) {
  ExpectSameRunOverShm(Dep4SmallBatch(2, sched::DummyPolicy::kCompat, /*seed=*/1,
                                      /*num_requests=*/400));
}

TEST(SimShmTest, AggregatedTwoRanksOverShm) {
  SimConfig config;
  config.ranks = 2;
  config.workload.num_requests = 100;
  ExpectSameRunOverShm(config);
}

// Random configurations (random_config_test's generator): 2-8 ranks, every role,
// drafter and draft pool, faults on or off.
TEST(SimShmTest, RandomConfigurationsOverShm) {
  std::set<uint64_t> digests;
  for (uint64_t seed : {1, 2, 3, 4}) digests.insert(ExpectSameRunOverShm(RandomConfig(seed)));
  EXPECT_EQ(digests.size(), 4u) << "different runs, same outcome digest";
}

}  // namespace
}  // namespace lockstep::sim

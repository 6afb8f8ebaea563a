// The simulator with its ranks' collectives over shared memory (ShmCommunicator, ranks
// as threads) instead of the in-process communicator: the small-batch DEP4 workload and
// an aggregated run complete the same way on both, since the simulator replays exactly
// whatever carries its collectives.
#include <memory>
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

void ExpectSameRunOverShm(SimConfig config) {
  const SimSummary in_process = RunSimulation(config);
  ASSERT_TRUE(in_process.ok()) << config.ToString() << "\n" << in_process.ToString();
  config.make_group = ShmGroup;
  const SimSummary shm = RunSimulation(config);
  ASSERT_TRUE(shm.ok()) << config.ToString() << "\n" << shm.ToString();
  EXPECT_EQ(shm.completed, in_process.completed) << shm.ToString();
  EXPECT_EQ(shm.failed, in_process.failed) << shm.ToString();
  EXPECT_EQ(shm.vetoed_steps, in_process.vetoed_steps) << shm.ToString();
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

}  // namespace
}  // namespace lockstep::sim

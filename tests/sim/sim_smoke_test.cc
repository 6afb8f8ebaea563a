#include "gtest/gtest.h"
#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {
namespace {

TEST(SimSmokeTest, AggregatedTwoRanks) {
  SimConfig c;
  c.ranks = 2;
  c.workload.num_requests = 50;
  SimSummary s = RunSimulation(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.completed, 50) << s.ToString();
  std::cerr << s.ToString() << "\n";
}

}  // namespace
}  // namespace lockstep::sim

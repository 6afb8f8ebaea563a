// The simulator explains every failed or cancelled request by a fault it injected into
// that request; any other failure is a violation naming the seed, step and rank.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

SimConfig Small(sched::InstanceRole role, uint64_t seed) {
  SimConfig c;
  c.seed = seed;
  c.ranks = 2;
  c.role = role;
  c.workload.num_requests = 60;
  c.workload.generation_only = role == sched::InstanceRole::kGeneration;
  c.workload.context_only = role == sched::InstanceRole::kContext;
  return c;
}

TEST(FaultExplanationTest, InjectedTransferFailuresAndCancelsExplainTheirRequests) {
  SimConfig c = Small(sched::InstanceRole::kGeneration, 11);
  c.transfer_failure_rate = 0.3;
  c.workload.cancel_fraction = 0.2;
  const SimSummary s = RunSimulation(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_GT(s.failed, 0) << s.ToString();
  EXPECT_GT(s.cancelled, 0) << s.ToString();
}

TEST(FaultExplanationTest, RefusedSendsExplainTheirRequests) {
  SimConfig c = Small(sched::InstanceRole::kContext, 12);
  c.send_refusal_rate = 0.3;
  const SimSummary s = RunSimulation(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_GT(s.send_refusals, 0) << s.ToString();
  EXPECT_EQ(s.failed, s.send_refusals) << s.ToString();
  EXPECT_GT(s.handed_off, 0) << s.ToString();
}

// The UCX data plane's faults (a peer gone mid-get, an endpoint error, a registration
// failure, a get that never completes) at the simulator's transfer-failure rate: every
// request completes, falls back and completes, or fails explained by its fault.
TEST(FaultExplanationTest, UcxTransferFaultsExplainTheirRequests) {
  SimConfig c = Small(sched::InstanceRole::kGeneration, 14);
  c.workload.num_requests = 120;
  c.transfer_failure_rate = 0.4;
  c.transfer_transport = transfer::FakeTransport::kUcx;
  c.transfer_deadline = absl::Seconds(2);
  const SimSummary s = RunSimulation(c);
  SCOPED_TRACE(c.ToString() + " transfer_transport=ucx\n" + s.ToString());
  EXPECT_TRUE(s.ok());
  EXPECT_GT(s.failed, 0);
  EXPECT_GT(s.transfer_fallbacks, 0);
  EXPECT_GT(s.completed, 0);
  EXPECT_EQ(s.completed + s.failed, s.requests);
}

// Receives that cannot finish before their deadline fail, but nothing was injected:
// each such failure is a violation.
TEST(FaultExplanationTest, UnexplainedFailureIsAViolation) {
  SimConfig c = Small(sched::InstanceRole::kGeneration, 13);
  c.transfer_min_latency = absl::Milliseconds(50);
  c.transfer_max_latency = absl::Milliseconds(60);
  c.transfer_deadline = absl::Milliseconds(5);
  const SimSummary s = RunSimulation(c);
  EXPECT_FALSE(s.ok()) << s.ToString();
  EXPECT_GT(s.failed, 0) << s.ToString();
  EXPECT_THAT(s.violations,
              Contains(AllOf(HasSubstr("seed 13 step "), HasSubstr(" rank "),
                             HasSubstr("failed without an injected fault to explain it"),
                             HasSubstr("deadline"))))
      << s.ToString();
}

}  // namespace
}  // namespace lockstep::sim

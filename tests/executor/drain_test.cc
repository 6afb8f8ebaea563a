// The drain deadline is decided by the leader's clock alone and broadcast: ranks whose
// clocks disagree still fail running requests and drop the replicated queue in the
// same step, and every accepted request is answered exactly once.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kRequests = 6;

// Two ranks of one slot each: two requests run, four wait in the replicated queue.
ClusterOptions OneSlotPerRank() {
  ClusterOptions o;
  o.ranks = 2;
  o.scheduler.max_batch_size = 1;
  o.scheduler.max_num_active_requests = 1;
  o.scheduler.max_num_tokens = 64;
  o.scheduler.prefix_reuse = false;
  o.num_blocks = 256;
  o.drain_timeout = absl::Milliseconds(50);
  return o;
}

// Submits long requests and the drain order; returns once both ranks drain.
void StartDraining(ScriptedCluster& c) {
  for (int i = 1; i <= kRequests; ++i) c.Submit(c.MakeRequest(i, 4, 400));
  ASSERT_TRUE(c.StepAll().ok());
  ASSERT_EQ(c.rank(0).queued_requests(), kRequests - 2);
  c.rank(0).inbox().Drain();
  ASSERT_TRUE(c.StepAll().ok());
  for (int r = 0; r < c.ranks(); ++r) ASSERT_TRUE(c.rank(r).Snapshot().draining) << r;
}

// One step; the replicated queue must be the same on every rank afterwards.
void StepInAgreement(ScriptedCluster& c) {
  ASSERT_TRUE(c.StepAll().ok()) << "step " << c.steps();
  for (int r = 1; r < c.ranks(); ++r) {
    ASSERT_EQ(c.rank(r).queued_requests(), c.rank(0).queued_requests())
        << "rank " << r << " and the leader disagree on the queue at step " << c.steps();
  }
  ASSERT_THAT(c.AuditAll(), IsEmpty()) << "step " << c.steps();
}

void ExpectEachAnsweredOnceByTheDeadline(ScriptedCluster& c) {
  for (int i = 1; i <= kRequests; ++i) {
    const Stream s = c.stream(RequestId(i));
    EXPECT_EQ(s.num_finished, 1) << "request " << i;
    EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable) << "request " << i;
    EXPECT_THAT(std::string(s.status.message()), HasSubstr("drain deadline")) << "request " << i;
  }
}

// A follower whose clock runs ahead does not expire the drain on its own.
TEST(DrainTest, FollowerClockAheadWaitsForTheLeader) {
  ScriptedCluster c(OneSlotPerRank());
  ASSERT_NO_FATAL_FAILURE(StartDraining(c));
  c.clock(1).Advance(absl::Seconds(10));  // far past the deadline, on rank 1 only
  for (int i = 0; i < 10; ++i) {
    ASSERT_NO_FATAL_FAILURE(StepInAgreement(c));
    ASSERT_EQ(c.rank(1).counters().failed, 0) << "rank 1 expired the drain on its own clock";
    ASSERT_EQ(c.rank(1).LiveIds().size(), 1u);
  }
  for (int i = 0; i < 200 && !(c.rank(0).drained() && c.rank(1).drained()); ++i) {
    ASSERT_NO_FATAL_FAILURE(StepInAgreement(c));
  }
  ASSERT_TRUE(c.rank(0).drained() && c.rank(1).drained());
  ExpectEachAnsweredOnceByTheDeadline(c);
}

// When the leader's clock passes the deadline, every rank acts in that same step,
// whatever its own clock says.
TEST(DrainTest, LeaderClockDecidesForEveryRank) {
  ScriptedCluster c(OneSlotPerRank());
  ASSERT_NO_FATAL_FAILURE(StartDraining(c));
  c.clock(0).Advance(absl::Seconds(10));  // past the deadline on the leader only
  ASSERT_NO_FATAL_FAILURE(StepInAgreement(c));
  for (int r = 0; r < c.ranks(); ++r) {
    EXPECT_EQ(c.rank(r).queued_requests(), 0) << "rank " << r;
    EXPECT_THAT(c.rank(r).LiveIds(), IsEmpty()) << "rank " << r;
  }
  EXPECT_EQ(c.rank(1).counters().failed, 1);  // its running request, in the same step
  ExpectEachAnsweredOnceByTheDeadline(c);
  for (int i = 0; i < 20 && !(c.rank(0).drained() && c.rank(1).drained()); ++i) {
    ASSERT_NO_FATAL_FAILURE(StepInAgreement(c));
  }
  EXPECT_TRUE(c.rank(0).drained() && c.rank(1).drained());
  ExpectEachAnsweredOnceByTheDeadline(c);
}

}  // namespace
}  // namespace lockstep::testing

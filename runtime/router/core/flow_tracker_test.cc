#include "runtime/router/core/flow_tracker.h"

#include <atomic>
#include <memory>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::StatusIs;

TEST(FlowTrackerTest, EndsTheLegsOnAnInstanceAndTheFlowsGoOn) {
  FlowTracker tracker;
  auto a = std::make_shared<FlowHandle>(1, [] { return true; });
  auto b = std::make_shared<FlowHandle>(2, [] { return true; });
  tracker.Add(a);
  tracker.Add(b);
  grpc::ClientContext call_a;
  grpc::ClientContext call_b;
  ASSERT_TRUE(a->BeginLeg("gen0", &call_a));
  ASSERT_TRUE(b->BeginLeg("gen1", &call_b));
  EXPECT_EQ(tracker.CancelOnInstance("gen0", absl::UnavailableError("gen0 died")), 1);
  EXPECT_THAT(a->leg_failure(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(a->cancel_reason().ok());
  EXPECT_TRUE(b->leg_failure().ok());
  // The first reason of the leg wins; it outlives the leg until the next one begins.
  EXPECT_TRUE(a->CancelLeg("gen0", absl::AbortedError("later")));
  a->EndLeg();
  EXPECT_THAT(a->leg_failure(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(a->CancelLeg("gen0", absl::AbortedError("between legs")));
  // The flow goes on on another instance, whose leg starts clean.
  grpc::ClientContext again;
  ASSERT_TRUE(a->BeginLeg("gen1", &again));
  EXPECT_TRUE(a->leg_failure().ok());
  EXPECT_EQ(tracker.CancelOnInstance("gen0", absl::UnavailableError("gen0 died")), 0);
  a->EndLeg();
  b->EndLeg();
  tracker.Remove(1);
  tracker.Remove(2);
  EXPECT_EQ(tracker.size(), 0u);
}

TEST(FlowTrackerTest, ACancelledFlowStartsNoOtherLeg) {
  auto a = std::make_shared<FlowHandle>(1, [] { return true; });
  grpc::ClientContext call;
  ASSERT_TRUE(a->BeginLeg("gen0", &call));
  a->Cancel(absl::CancelledError("the client disconnected"));
  // The first reason wins.
  a->Cancel(absl::UnavailableError("later"));
  EXPECT_THAT(a->cancel_reason(), StatusIs(absl::StatusCode::kCancelled));
  a->EndLeg();
  grpc::ClientContext again;
  EXPECT_FALSE(a->BeginLeg("gen1", &again));
}

TEST(FlowTrackerTest, CancelsFlowsWhoseClientLeft) {
  FlowTracker tracker;
  std::atomic<bool> connected{true};
  auto flow = std::make_shared<FlowHandle>(7, [&connected] { return connected.load(); });
  tracker.Add(flow);
  EXPECT_EQ(tracker.CancelDisconnected(), 0);
  connected = false;
  EXPECT_EQ(tracker.CancelDisconnected(), 1);
  EXPECT_THAT(flow->cancel_reason(), StatusIs(absl::StatusCode::kCancelled));
}

TEST(FlowTrackerTest, ADetachedFlowNeverCallsItsCallback) {
  std::atomic<int> calls{0};
  FlowHandle flow(3, [&calls] {
    ++calls;
    return false;
  });
  EXPECT_FALSE(flow.ClientConnected());
  flow.Detach();
  EXPECT_TRUE(flow.ClientConnected());
  EXPECT_EQ(calls, 1);
}

TEST(FlowTrackerTest, CloseCancelsPresentAndFutureFlows) {
  FlowTracker tracker;
  auto before = std::make_shared<FlowHandle>(1, [] { return true; });
  tracker.Add(before);
  tracker.Close(absl::CancelledError("shutting down"));
  auto after = std::make_shared<FlowHandle>(2, [] { return true; });
  tracker.Add(after);
  EXPECT_THAT(before->cancel_reason(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(after->cancel_reason(), StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace lockstep::router

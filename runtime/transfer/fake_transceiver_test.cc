#include "runtime/transfer/fake_transceiver.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

ReceiveSpec Receive(int64_t id, absl::Time deadline, std::vector<int32_t> blocks = {1}) {
  ReceiveSpec s;
  s.blocks.id = RequestId(id);
  for (int32_t b : blocks) s.blocks.target_blocks.push_back(BlockId(b));
  s.deadline = deadline;
  return s;
}

TEST(FakeTransceiverTest, EventsComeAfterTheirLatencyInTimeOrder) {
  FakeClock clock;
  FakeTransceiverOptions o;
  o.min_latency = o.max_latency = absl::Milliseconds(10);
  FakeTransceiver t(o, &clock);
  ASSERT_THAT(t.StartReceive(Receive(1, clock.Now() + absl::Seconds(1))), IsOk());
  clock.Advance(absl::Milliseconds(5));
  ASSERT_THAT(t.StartReceive(Receive(2, clock.Now() + absl::Seconds(1))), IsOk());
  EXPECT_TRUE(t.Poll().empty());
  EXPECT_THAT(t.StartReceive(Receive(1, clock.Now())), StatusIs(absl::StatusCode::kAlreadyExists));
  clock.Advance(absl::Milliseconds(20));
  std::vector<TransferEvent> events = t.Poll();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, RequestId(1));
  EXPECT_EQ(events[1].id, RequestId(2));
  EXPECT_THAT(events[0].status, IsOk());
  EXPECT_EQ(t.InFlight(), 0);
}

TEST(FakeTransceiverTest, DeadlinesAndCancels) {
  FakeClock clock;
  FakeTransceiverOptions o;
  o.min_latency = o.max_latency = absl::Milliseconds(100);
  FakeTransceiver t(o, &clock);
  ASSERT_THAT(t.StartReceive(Receive(1, clock.Now() + absl::Milliseconds(10))), IsOk());
  ASSERT_THAT(t.StartReceive(Receive(2, clock.Now() + absl::Seconds(1))), IsOk());
  t.Cancel(RequestId(2));
  clock.Advance(absl::Milliseconds(20));
  std::vector<TransferEvent> events = t.Poll();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(events[1].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(FakeTransceiverTest, RefusesAReceiveIntoBlocksABatchStillHolds) {
  FakeClock clock;
  engine::BlockWriteTracker tracker;
  FakeTransceiverOptions o;
  o.tracker = &tracker;
  FakeTransceiver t(o, &clock);
  tracker.Launched(7, {{0, 3}});
  EXPECT_THAT(t.StartReceive(Receive(1, clock.Now() + absl::Seconds(1), {3})),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("engine batch 7")));
  tracker.Collected(7);
  EXPECT_THAT(t.StartReceive(Receive(1, clock.Now() + absl::Seconds(1), {3})), IsOk());
}

}  // namespace
}  // namespace lockstep::transfer

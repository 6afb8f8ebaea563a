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
  for (int32_t b : blocks) s.blocks.blocks.push_back(BlockId(b));
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

SendSpec Send(int64_t id, absl::Time lease) {
  SendSpec s;
  s.blocks.id = RequestId(id);
  s.blocks.blocks.push_back(BlockId(1));
  s.lease_expiry = lease;
  return s;
}

TEST(FakeTransceiverTest, RefusesSendsByPredicateAndRecordsThem) {
  FakeClock clock;
  FakeTransceiverOptions o;
  o.refuse_send = [](RequestId id) { return id.value() == 2; };
  FakeTransceiver t(o, &clock);
  EXPECT_THAT(t.StartSend(Send(1, clock.Now() + absl::Seconds(1))), IsOk());
  EXPECT_THAT(t.StartSend(Send(2, clock.Now() + absl::Seconds(1))),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("send refusal of request 2")));
  EXPECT_EQ(t.InFlight(), 1);  // a refused send holds nothing
  ASSERT_EQ(t.injected().size(), 1u);
  EXPECT_EQ(t.injected()[0].kind, InjectedFault::Kind::kSendRefusal);
  EXPECT_EQ(t.injected()[0].id, RequestId(2));
}

TEST(FakeTransceiverTest, SendRefusalRateIsSeeded) {
  auto refused = [](uint64_t seed) {
    FakeClock clock;
    FakeTransceiverOptions o;
    o.seed = seed;
    o.send_refusal_rate = 0.5;
    FakeTransceiver t(o, &clock);
    std::vector<int64_t> ids;
    for (int64_t id = 1; id <= 64; ++id) {
      if (!t.StartSend(Send(id, clock.Now() + absl::Seconds(1))).ok()) ids.push_back(id);
    }
    EXPECT_EQ(t.injected().size(), ids.size()) << "seed " << seed;
    return ids;
  };
  const std::vector<int64_t> a = refused(3);
  EXPECT_EQ(a, refused(3));
  EXPECT_GT(a.size(), 8u);
  EXPECT_LT(a.size(), 56u);
}

}  // namespace
}  // namespace lockstep::transfer

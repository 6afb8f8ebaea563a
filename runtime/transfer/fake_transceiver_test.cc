#include "runtime/transfer/fake_transceiver.h"

#include <map>

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

// With the UCX transport every injected failure is one of its four faults, each ending
// as the real data plane ends it and never after the receive's deadline.
TEST(FakeTransceiverTest, UcxFaultsEndAsTheDataPlaneEndsThemByTheirDeadline) {
  constexpr uint64_t kSeed = 17;
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  FakeClock clock;
  FakeTransceiverOptions o;
  o.seed = kSeed;
  o.min_latency = o.max_latency = absl::Milliseconds(10);
  o.failure_rate = 1.0;
  o.transport = FakeTransport::kUcx;
  FakeTransceiver t(o, &clock);
  const absl::Time start = clock.Now();
  const absl::Duration deadline = absl::Milliseconds(500);
  constexpr int64_t kReceives = 200;
  for (int64_t id = 1; id <= kReceives; ++id) {
    ASSERT_THAT(t.StartReceive(Receive(id, start + deadline)), IsOk());
  }
  // Each receive's fault, and when and how it ended.
  std::map<RequestId, UcxFault> fault;
  for (const InjectedFault& f : t.injected()) {
    EXPECT_EQ(f.kind, f.ucx == UcxFault::kRegistrationFailure
                          ? InjectedFault::Kind::kTransferFallback
                          : InjectedFault::Kind::kTransferFailure);
    fault[f.id] = f.ucx;
  }
  ASSERT_EQ(fault.size(), static_cast<size_t>(kReceives));
  std::map<UcxFault, int> seen;
  int ended = 0;
  for (absl::Duration at = absl::ZeroDuration(); at <= deadline; at += absl::Milliseconds(1)) {
    if (at > absl::ZeroDuration()) clock.Advance(absl::Milliseconds(1));
    for (const TransferEvent& e : t.Poll()) {
      ++ended;
      const UcxFault f = fault[e.id];
      ++seen[f];
      switch (f) {
        case UcxFault::kPeerGoneMidGet:  // part way through the transfer
          EXPECT_THAT(e.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("mid-get")));
          EXPECT_LE(at, absl::Milliseconds(10));
          break;
        case UcxFault::kEndpointError:  // at once
          EXPECT_THAT(e.status,
                      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("endpoint error")));
          EXPECT_EQ(at, absl::ZeroDuration());
          break;
        case UcxFault::kRegistrationFailure:  // pulled over TCP after the refused offer
          EXPECT_THAT(e.status, IsOk());
          EXPECT_EQ(at, absl::Milliseconds(20));
          break;
        case UcxFault::kGetStuck:  // at the deadline
          EXPECT_THAT(e.status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                         HasSubstr("did not complete by its deadline")));
          EXPECT_EQ(at, deadline);
          break;
        case UcxFault::kNone:
          ADD_FAILURE() << "request " << e.id.value() << " ended without its fault";
      }
    }
  }
  EXPECT_EQ(ended, kReceives);  // all by the deadline
  EXPECT_EQ(t.InFlight(), 0);
  for (UcxFault f : {UcxFault::kPeerGoneMidGet, UcxFault::kEndpointError,
                     UcxFault::kRegistrationFailure, UcxFault::kGetStuck}) {
    EXPECT_GT(seen[f], 20) << static_cast<int>(f);
  }
}

// A fallback that cannot finish before the deadline ends at it, as any late transfer.
TEST(FakeTransceiverTest, UcxFallbackPastTheDeadlineExpiresAtIt) {
  FakeClock clock;
  FakeTransceiverOptions o;
  o.seed = 5;
  o.min_latency = o.max_latency = absl::Milliseconds(10);
  o.failure_rate = 1.0;
  o.transport = FakeTransport::kUcx;
  FakeTransceiver t(o, &clock);
  const absl::Time start = clock.Now();
  for (int64_t id = 1; id <= 64; ++id) {
    ASSERT_THAT(t.StartReceive(Receive(id, start + absl::Milliseconds(15))), IsOk());
  }
  clock.Advance(absl::Milliseconds(15));
  int fallbacks = 0;
  std::map<RequestId, UcxFault> fault;
  for (const InjectedFault& f : t.injected()) fault[f.id] = f.ucx;
  for (const TransferEvent& e : t.Poll()) {
    if (fault[e.id] != UcxFault::kRegistrationFailure) continue;
    ++fallbacks;
    EXPECT_THAT(e.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  }
  EXPECT_GT(fallbacks, 0);
  EXPECT_EQ(t.InFlight(), 0);
}

}  // namespace
}  // namespace lockstep::transfer

// GrpcTransceiver under faults, over real gRPC on 127.0.0.1:0 in one process: a
// corrupted chunk, cancels on either side in the middle of a transfer, a context rank
// that shuts down or stalls mid-stream, a second pull of a claim, a lease that expires
// during a pull, an unreachable rank. Test hooks hold the serving or receiving thread
// at a chunk (every wait bounded); each case checks exactly one event per transfer.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::testing::AnyOf;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;
using testing::TouchedOutside;
using testing::TransportName;
using testing::TransportTest;

constexpr absl::Duration kWait = absl::Seconds(20);
constexpr absl::Duration kHold = absl::Seconds(15);  // longest a hook holds a thread

// A point where a hook holds its thread until the test lets it go.
struct Gate {
  absl::Notification reached;
  absl::Notification release;

  void Hold() {
    if (!reached.HasBeenNotified()) reached.Notify();
    release.WaitForNotificationWithTimeout(kHold);
  }
  bool AwaitReached() { return reached.WaitForNotificationWithTimeout(kWait); }
};

// Holds the serving thread before chunk `index` of every pull until released.
TransferHooks HoldSendAt(int64_t index, Gate& gate) {
  TransferHooks hooks;
  hooks.before_send_chunk = [index, &gate](const SendChunkInfo& chunk, std::string*,
                                           const absl::Notification&) {
    if (chunk.index == index) gate.Hold();
  };
  return hooks;
}

// Holds the serving thread before chunk `index` until the pull is aborted.
TransferHooks HoldSendUntilAbort(int64_t index, Gate& gate) {
  TransferHooks hooks;
  hooks.before_send_chunk = [index, &gate](const SendChunkInfo& chunk, std::string*,
                                           const absl::Notification& abort) {
    if (chunk.index != index) return;
    gate.reached.Notify();
    abort.WaitForNotificationWithTimeout(kHold);
  };
  return hooks;
}

class GrpcTransceiverFaultTest : public TransportTest {
 protected:
  ReceiveSpec Receive(TestBlocks blocks, const std::string& address, RequestId remote_id,
                      absl::Duration timeout = kWait) {
    return TransportTest::Receive(std::move(blocks), address, remote_id, timeout);
  }

  // Starts a send of a 40-token request (10 target blocks, 4 per chunk) on `ctx` and its
  // receive on `gen`.
  void StartPair(TestRank& ctx, TestRank& gen, bool draft, absl::Duration deadline = kWait) {
    sent_ = RandomBlocks(RequestId(11), 40, d_, draft, 64, 0, rng_);
    received_ = RandomBlocks(RequestId(22), 40, d_, draft, 64, 0, rng_);
    ASSERT_THAT(ctx->StartSend({sent_, sent_.num_tokens, clock_.Now() + absl::Minutes(1)}), IsOk());
    ASSERT_THAT(gen->StartReceive(Receive(received_, ctx->address(), sent_.id, deadline)), IsOk());
  }

  // Exactly one event from `rank`, which must then have nothing in flight.
  TransferEvent OnlyEvent(TestRank& rank) {
    std::vector<TransferEvent> events = AwaitEvents(rank, 1, kWait);
    EXPECT_EQ(events.size(), 1u);
    EXPECT_THAT(rank->Poll(), IsEmpty());
    EXPECT_EQ(rank->InFlight(), 0);
    return events.empty() ? TransferEvent{} : events[0];
  }

  const KvDescriptor d_ = SmallDescriptor();
  TestBlocks sent_;
  TestBlocks received_;
};

// A byte flipped on the wire after the checksums were computed: the receive fails with
// DataLoss naming the block, which is never written.
TEST_P(GrpcTransceiverFaultTest, CorruptChunkFailsNamingTheBlock) {
  SCOPED_TRACE(SeedTrace(seed_));
  TransferHooks corrupt;
  corrupt.before_send_chunk = [](const SendChunkInfo& chunk, std::string* payload,
                                 const absl::Notification&) {
    if (chunk.index == 1) (*payload)[100] ^= 0x01;  // in the chunk's first block: block 4
  };
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = corrupt}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/false);
  const TransferEvent got = OnlyEvent(*gen);
  EXPECT_EQ(got.id, received_.id);
  EXPECT_THAT(got.status,
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr(absl::StrCat("KV block 4 of the target pool (local block ",
                                              received_.blocks[4].value(), ")"))));
  // Blocks 0..3 arrived; nothing after the corrupt chunk was written. Over gRPC, block 4
  // failed before it was written; the data plane reads a chunk into its blocks before
  // checking them, so it wrote the corrupt chunk (blocks 4..7), which the failure
  // leaves unusable.
  TestBlocks written = received_;
  written.num_tokens = GetParam() ? 32 : 16;
  EXPECT_THAT(TouchedOutside(*gen, {written}, d_), IsEmpty());
  OnlyEvent(*ctx);  // the claim ended once (the serving side may or may not have finished)
}

// Cancel on the generation side while the receiving thread is inside a chunk: no event
// until that thread has stopped, then kCancelled, and no write after it.
TEST_P(GrpcTransceiverFaultTest, CancelledReceiveReportsAfterTheWriterStopped) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate writer;
  Gate server;
  std::atomic<bool> event_polled{false};
  std::atomic<int> writes_after_event{0};
  TransferHooks receive_hooks;
  receive_hooks.after_receive_chunk = [&](RequestId, int64_t index) {
    if (event_polled) ++writes_after_event;
    if (index == 0) writer.Hold();
  };
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendAt(2, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_, .hooks = receive_hooks}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/true);
  ASSERT_TRUE(writer.AwaitReached());
  (*gen)->Cancel(received_.id);
  EXPECT_THAT((*gen)->Poll(), IsEmpty());  // the writer has not stopped yet
  EXPECT_EQ((*gen)->InFlight(), 1);
  writer.release.Notify();
  const TransferEvent got = OnlyEvent(*gen);
  event_polled = true;
  EXPECT_THAT(got.status, StatusIs(absl::StatusCode::kCancelled));
  server.release.Notify();
  // The claim ends once; OK or not depends on whether the serving thread wrote the rest
  // into the transport before it learned that the puller had gone.
  OnlyEvent(*ctx);
  gen.reset();  // joins the receive threads
  EXPECT_EQ(writes_after_event, 0);
}

// Cancel on the context side while the serving thread is inside a chunk: the claim's
// event waits for that thread, then says kCancelled; the receive fails.
TEST_P(GrpcTransceiverFaultTest, CancelledSendReportsAfterTheServerStopped) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendAt(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/true);
  ASSERT_TRUE(server.AwaitReached());
  (*ctx)->Cancel(sent_.id);
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());  // the serving thread still reads the blocks
  EXPECT_EQ((*ctx)->InFlight(), 1);
  server.release.Notify();
  EXPECT_THAT(OnlyEvent(*ctx).status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(OnlyEvent(*gen).status, AnyOf(StatusIs(absl::StatusCode::kUnavailable),
                                            StatusIs(absl::StatusCode::kAborted)));
}

// The context rank shuts down in the middle of a stream: the receive fails Unavailable
// at once, well inside its deadline.
TEST_P(GrpcTransceiverFaultTest, ContextShutdownMidStreamFailsUnavailable) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx =
      Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendUntilAbort(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/true, absl::Minutes(5));
  ASSERT_TRUE(server.AwaitReached());
  ctx.reset();  // aborts the pull (the hook returns) and stops the server
  EXPECT_THAT(OnlyEvent(*gen).status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("pull of request 11")));
}

// A context rank that stops sending mid-stream: the receive fails DeadlineExceeded at
// its deadline; the claim ends once.
TEST_P(GrpcTransceiverFaultTest, StalledContextFailsAtTheDeadline) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendAt(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/false, absl::Seconds(1));
  ASSERT_TRUE(server.AwaitReached());
  EXPECT_THAT(OnlyEvent(*gen).status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  server.release.Notify();
  OnlyEvent(*ctx);  // once; whether the rest made it into the transport is a race
}

// A second pull of a claim being pulled is refused; the first goes on and completes.
TEST_P(GrpcTransceiverFaultTest, SecondPullOfAClaimIsRefused) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendAt(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  auto other = Rank({.name = "gen other", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen && other);
  StartPair(*ctx, *gen, /*draft=*/true);
  ASSERT_TRUE(server.AwaitReached());
  const TestBlocks second = RandomBlocks(RequestId(33), 40, d_, true, 64, 0, rng_);
  ASSERT_THAT((*other)->StartReceive(Receive(second, (*ctx)->address(), sent_.id)), IsOk());
  EXPECT_THAT(OnlyEvent(*other).status,
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already being pulled")));
  EXPECT_THAT(TouchedOutside(*other, {}, d_), IsEmpty());
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());  // the claim goes on
  server.release.Notify();
  EXPECT_THAT(OnlyEvent(*gen).status, IsOk());
  EXPECT_THAT(OnlyEvent(*ctx).status, IsOk());
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent_, *gen, received_, d_), IsEmpty());
}

// The lease passes while the claim is being pulled: the pull is aborted and the claim
// ends once, with kDeadlineExceeded, after the serving thread stopped.
TEST_P(GrpcTransceiverFaultTest, LeaseExpiringDuringAPullAbortsIt) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx =
      Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendUntilAbort(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/true);  // lease: one minute
  ASSERT_TRUE(server.AwaitReached());
  clock_.Advance(absl::Minutes(2));
  EXPECT_THAT(OnlyEvent(*ctx).status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(OnlyEvent(*gen).status, AnyOf(StatusIs(absl::StatusCode::kUnavailable),
                                            StatusIs(absl::StatusCode::kAborted)));
}

// With one receive thread busy, a queued receive is cancelled at once.
TEST_P(GrpcTransceiverFaultTest, QueuedReceiveIsCancelledAtOnce) {
  SCOPED_TRACE(SeedTrace(seed_));
  Gate server;
  auto ctx = Rank({.name = "ctx", .descriptor = d_, .hooks = HoldSendAt(1, server)}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d_, .max_concurrent_receives = 1}, 0);
  ASSERT_TRUE(ctx && gen);
  StartPair(*ctx, *gen, /*draft=*/false);
  ASSERT_TRUE(server.AwaitReached());
  const TestBlocks queued = RandomBlocks(RequestId(44), 8, d_, false, 64, 0, rng_);
  ASSERT_THAT((*gen)->StartReceive(Receive(queued, (*ctx)->address(), RequestId(12345))), IsOk());
  (*gen)->Cancel(queued.id);
  std::vector<TransferEvent> events = (*gen)->Poll();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, queued.id);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ((*gen)->InFlight(), 1);
  server.release.Notify();
  EXPECT_THAT(OnlyEvent(*gen).status, IsOk());
  EXPECT_THAT(OnlyEvent(*ctx).status, IsOk());
}

TEST_P(GrpcTransceiverFaultTest, UnreachableContextRankFailsUnavailable) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto gone = Rank({.name = "gone", .descriptor = d_}, 0);
  auto gen = Rank({.name = "gen", .descriptor = d_}, 0);
  ASSERT_TRUE(gone && gen);
  const std::string address = (*gone)->address();
  gone.reset();
  const TestBlocks blocks = RandomBlocks(RequestId(1), 8, d_, false, 64, 0, rng_);
  ASSERT_THAT((*gen)->StartReceive(Receive(blocks, address, RequestId(1))), IsOk());
  EXPECT_THAT(OnlyEvent(*gen).status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(TouchedOutside(*gen, {}, d_), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Transports, GrpcTransceiverFaultTest, ::testing::Bool(), TransportName);

}  // namespace
}  // namespace lockstep::transfer

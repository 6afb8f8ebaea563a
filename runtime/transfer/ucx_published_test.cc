// Published UCX offers (ucx_published.h, UcxOffer.published): a context rank and a
// generation rank in one process, over the UCX transports UCX_TLS names (the BUILD file
// runs this test with shm and with tcp). Where the staged copy maps in place (shm) the
// session Offers after a connection's first are answered before staging and read as
// the blocks are published: moved bit-exact; a piece never published ends the receive
// at its deadline or on its cancel; a damaged piece fails its checksum; a staging
// failure after the answer fails the receive with it, and so does the context rank
// shutting down mid-staging; a rank of an earlier version on either side gets ordinary
// offers. Over tcp no offer is published.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/poll_until.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;

constexpr absl::Duration kWait = absl::Seconds(20);
// Tokens moved: 25 blocks of SmallDescriptor, staged in several 4 KiB chunks, each
// published once written.
constexpr int64_t kTokens = 100;

// Whether the staged copy maps in place (shared memory): only then is an offer published.
bool Maps() {
  const char* tls = std::getenv("UCX_TLS");
  return tls == nullptr || !absl::StrContains(tls, "tcp");
}

// The context rank's staging of request 8 stopped on demand (TransferHooks::
// before_send_chunk) at its second chunk, after its first chunk's blocks were
// published; `damage` flips a byte of that chunk instead.
struct StagingHook {
  absl::Notification reached;   // staging is at the second chunk
  absl::Notification released;  // staging may go on
  bool damage = false;
  bool stop = false;
};

class UcxPublishedTest : public testing::TransportTest {
 protected:
  // Ranks whose staging `hook` (may be null) stops or damages, `old_context` /
  // `old_generation` of an earlier version (no published offers); request 7 moved as 40
  // (over gRPC's Offer: the session and its mapping are set up). False with a failure
  // where a step failed.
  bool Start(StagingHook* hook, bool old_context = false, bool old_generation = false) {
    RankConfig ctx_config{.name = "ctx0 rank 0", .descriptor = SmallDescriptor()};
    ctx_config.ucx = true;
    ctx_config.ucx_hooks.no_published = old_context;
    if (hook != nullptr) {
      ctx_config.hooks.before_send_chunk = [hook](const SendChunkInfo& chunk, std::string* payload,
                                                  const absl::Notification& abort) {
        if (chunk.id != RequestId(8) || chunk.index != 1) return;
        if (hook->damage) (*payload)[0] = static_cast<char>((*payload)[0] ^ 0x5a);
        if (!hook->stop) return;
        hook->reached.Notify();
        // Bounded: the test releases it, or the claim is aborted.
        const absl::Time until = absl::Now() + kWait;
        while (!hook->released.HasBeenNotified() && !abort.HasBeenNotified() &&
               absl::Now() < until) {
          hook->released.WaitForNotificationWithTimeout(absl::Milliseconds(5));
        }
      };
    }
    RankConfig gen_config{.name = "gen0 rank 1", .descriptor = SmallDescriptor()};
    gen_config.ucx = true;
    gen_config.ucx_hooks.no_published = old_generation;
    ctx_ = Rank(ctx_config, seed_ + 1);
    gen_ = Rank(gen_config, 0);
    if (ctx_ == nullptr || gen_ == nullptr) return false;
    const absl::Status first = Move(7, 40, kWait);
    EXPECT_THAT(first, IsOk());
    return first.ok();
  }

  // Starts moving request `from`'s kTokens tokens' target blocks into request `to` with `timeout`.
  absl::Status StartMove(int64_t from, int64_t to, absl::Duration timeout) {
    const KvDescriptor d = SmallDescriptor();
    sent_ = RandomBlocks(RequestId(from), kTokens, d, /*draft=*/false, 64, 0, rng_);
    received_ = RandomBlocks(RequestId(to), kTokens, d, /*draft=*/false, 64, 0, rng_);
    if (absl::Status s = (*ctx_)->StartSend(Send(sent_)); !s.ok()) return s;
    return (*gen_)->StartReceive(Receive(received_, *ctx_, sent_.id, timeout));
  }

  // The receive's status, once it came.
  absl::Status Outcome() {
    const std::vector<TransferEvent> got = AwaitEvents(*gen_, 1, kWait);
    if (got.size() != 1) return absl::InternalError("the receive reported no event");
    return got[0].status;
  }

  // StartMove and its outcome; an OK move's blocks are compared.
  absl::Status Move(int64_t from, int64_t to, absl::Duration timeout) {
    if (absl::Status s = StartMove(from, to, timeout); !s.ok()) return s;
    const absl::Status got = Outcome();
    if (got.ok()) {
      EXPECT_THAT(CompareMovedBlocks(*ctx_, sent_, *gen_, received_, SmallDescriptor()), IsEmpty());
    }
    return got;
  }

  int64_t published() const { return (*ctx_)->ucx_data_plane()->stats().published; }

  StagingHook hook_;  // outlives the ranks, whose staging it may stop
  std::unique_ptr<TestRank> ctx_;
  std::unique_ptr<TestRank> gen_;
  TestBlocks sent_;
  TestBlocks received_;
};

TEST_P(UcxPublishedTest, PublishedOffersMoveBitExact) {
  SCOPED_TRACE(SeedTrace(seed_));
  ASSERT_TRUE(Start(nullptr));
  EXPECT_EQ(published(), 0);  // the first Offer went over gRPC
  for (int i = 0; i < 3; ++i) EXPECT_THAT(Move(8 + i, 41 + i, kWait), IsOk());
  EXPECT_EQ(published(), Maps() ? 3 : 0);
  EXPECT_EQ((*gen_)->pulls_over_ucx(), 4);
  EXPECT_TRUE(PollUntil([&] { return (*ctx_)->ucx_data_plane()->stats().released == 4; }));
  EXPECT_EQ((*ctx_)->ucx_data_plane()->stats().staged_bytes, 0);
}

// A rank of an earlier version on either side: the generation rank does not ask, or
// the context rank does not answer, for a published offer; the pulls are as before.
TEST_P(UcxPublishedTest, RanksOfAnEarlierVersionKeepOrdinaryOffers) {
  SCOPED_TRACE(SeedTrace(seed_));
  for (bool old_context : {true, false}) {
    SCOPED_TRACE(old_context ? "old context rank" : "old generation rank");
    ASSERT_TRUE(Start(nullptr, old_context, !old_context));
    EXPECT_THAT(Move(8, 41, kWait), IsOk());
    EXPECT_EQ(published(), 0);
    EXPECT_TRUE(PollUntil([&] { return (*ctx_)->ucx_data_plane()->stats().released == 2; }));
  }
}

// A piece never published (staging stopped after the answer): the receive fails at its
// deadline, naming what was published, over UCX (no fallback).
TEST_P(UcxPublishedTest, APieceNeverPublishedFailsAtTheDeadline) {
  SCOPED_TRACE(SeedTrace(seed_));
  if (!Maps()) GTEST_SKIP() << "no published offers without shared memory";
  hook_.stop = true;
  ASSERT_TRUE(Start(&hook_));
  // Long enough for the session Offer and its answer on a loaded machine: only the
  // wait for the unpublished piece may meet the deadline.
  const absl::Duration timeout = absl::Seconds(3);
  const absl::Time start = absl::Now();
  ASSERT_THAT(StartMove(8, 41, timeout), IsOk());
  EXPECT_THAT(Outcome(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("blocks of its answered offer by the pull's deadline")));
  EXPECT_LT(absl::Now() - start, timeout + absl::Seconds(5));
  EXPECT_TRUE(hook_.reached.HasBeenNotified());
  hook_.released.Notify();
  EXPECT_EQ(published(), 1);
  EXPECT_EQ((*gen_)->ucx_fallbacks(), 0);
}

// A cancel while a piece is waited for ends the receive Cancelled.
TEST_P(UcxPublishedTest, ACancelWhileAPieceIsAwaitedEndsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  if (!Maps()) GTEST_SKIP() << "no published offers without shared memory";
  hook_.stop = true;
  ASSERT_TRUE(Start(&hook_));
  ASSERT_THAT(StartMove(8, 41, kWait), IsOk());
  ASSERT_TRUE(hook_.reached.WaitForNotificationWithTimeout(kWait));
  (*gen_)->Cancel(received_.id);
  EXPECT_THAT(Outcome(), StatusIs(absl::StatusCode::kCancelled));
  hook_.released.Notify();
}

// A block damaged after its checksum was computed fails the receive with DataLoss.
TEST_P(UcxPublishedTest, ADamagedPieceFailsItsChecksum) {
  SCOPED_TRACE(SeedTrace(seed_));
  hook_.damage = true;
  ASSERT_TRUE(Start(&hook_));
  ASSERT_THAT(StartMove(8, 41, kWait), IsOk());
  EXPECT_THAT(Outcome(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("pull of request 8")));
  EXPECT_EQ(published(), Maps() ? 1 : 0);
}

// Staging that fails after the offer was answered (the send cancelled mid-staging):
// the receive fails with the context rank's error, not at its deadline.
TEST_P(UcxPublishedTest, AStagingFailureAfterTheAnswerFailsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  if (!Maps()) GTEST_SKIP() << "no published offers without shared memory";
  hook_.stop = true;
  ASSERT_TRUE(Start(&hook_));
  ASSERT_THAT(StartMove(8, 41, absl::Seconds(60)), IsOk());
  ASSERT_TRUE(hook_.reached.WaitForNotificationWithTimeout(kWait));
  (*ctx_)->Cancel(sent_.id);  // aborts the claim: the stopped staging ends with Aborted
  const absl::Status got = Outcome();
  EXPECT_FALSE(got.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(got)) << got;
  EXPECT_THAT(got.message(), HasSubstr("failed to stage the offer it had answered"));
  EXPECT_THAT(got.message(), HasSubstr("pull of request 8"));
  hook_.released.Notify();
}

// The context rank shutting down while a piece is awaited (its claim aborted
// mid-staging, its offer dropped while the range is still written): the receive fails
// with the context rank's error long before its 60 s deadline.
TEST_P(UcxPublishedTest, AContextRankShuttingDownMidStagingFailsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  if (!Maps()) GTEST_SKIP() << "no published offers without shared memory";
  hook_.stop = true;
  ASSERT_TRUE(Start(&hook_));
  ASSERT_THAT(StartMove(8, 41, absl::Seconds(60)), IsOk());
  ASSERT_TRUE(hook_.reached.WaitForNotificationWithTimeout(kWait));
  const absl::Time start = absl::Now();
  ctx_.reset();
  const absl::Status got = Outcome();
  EXPECT_FALSE(got.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(got)) << got;
  EXPECT_THAT(got.message(), HasSubstr("pull of request 8"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// The TCP data plane on (the fallback); the UCX transport comes from UCX_TLS.
INSTANTIATE_TEST_SUITE_P(Ucx, UcxPublishedTest, ::testing::Values(true), testing::TransportName);

}  // namespace
}  // namespace lockstep::transfer

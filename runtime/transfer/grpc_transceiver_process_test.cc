// A context rank in its own process, killed or stopped while a generation rank (this
// process) pulls from it over loopback: SIGKILL mid-stream fails the receive with
// Unavailable; SIGSTOP fails it with DeadlineExceeded at its deadline, and after
// SIGCONT the rank serves again. The child is this binary re-executed with
// LOCKSTEP_TRANSFER_CHILD set (no gRPC state crosses a fork).
#include <poll.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/self_process.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::SelfProcess;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::IsEmpty;
using testing::MakeRank;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;

constexpr char kChildEnv[] = "LOCKSTEP_TRANSFER_CHILD";  // "<seed>,<hold>"
constexpr int kClaims = 2;
constexpr int64_t kTokens = 40;
constexpr absl::Duration kWait = absl::Seconds(20);

// The claims the child offers, request ids 1..kClaims; the same sequence in both
// processes for the same seed.
std::vector<TestBlocks> ChildClaims(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TestBlocks> claims;
  for (int i = 1; i <= kClaims; ++i) {
    claims.push_back(RandomBlocks(RequestId(i), kTokens, SmallDescriptor(), true, 64, 0, rng));
  }
  return claims;
}

// The child: a context rank offering ChildClaims(seed); prints its address, then serves
// until its stdin closes (or a minute passes). With `hold`, every pull stops before
// its second chunk until aborted.
int RunChild(const std::string& spec) {
  const size_t comma = spec.find(',');
  uint64_t seed = 0;
  if (comma == std::string::npos || !absl::SimpleAtoi(spec.substr(0, comma), &seed)) return 2;
  const bool hold = spec.substr(comma + 1) == "1";
  RankConfig config{.name = "ctx child"};
  if (hold) {
    config.hooks.before_send_chunk = [](const SendChunkInfo& chunk, std::string*,
                                        const absl::Notification& abort) {
      if (chunk.index == 1) abort.WaitForNotificationWithTimeout(absl::Minutes(1));
    };
  }
  absl::StatusOr<std::unique_ptr<TestRank>> rank = MakeRank(config, SystemClock::Get(), seed);
  if (!rank.ok()) return 3;
  for (const TestBlocks& claim : ChildClaims(seed)) {
    if (!(**rank)
             ->StartSend({claim, claim.num_tokens, SystemClock::Get()->Now() + absl::Minutes(5)})
             .ok()) {
      return 4;
    }
  }
  std::printf("%s\n", (**rank)->address().c_str());
  std::fflush(stdout);
  pollfd in{.fd = 0, .events = POLLIN, .revents = 0};
  poll(&in, 1, 60'000);  // returns when the parent closes the pipe (or dies)
  return 0;
}

class GrpcTransceiverProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { seed_ = TestSeed(); }

  ReceiveSpec Receive(const TestBlocks& blocks, const std::string& address, RequestId remote,
                      absl::Duration timeout) {
    ReceiveSpec spec;
    spec.blocks = blocks;
    spec.num_tokens = blocks.num_tokens;
    spec.source.instance = "ctx child";
    spec.source.address = address;
    spec.source.request_id = remote;
    spec.deadline = clock_.Now() + timeout;
    return spec;
  }

  uint64_t seed_ = 0;
  FakeClock clock_;
};

TEST_F(GrpcTransceiverProcessTest, KilledContextRankFailsTheReceiveUnavailable) {
  SCOPED_TRACE(SeedTrace(seed_));
  SelfProcess child(kChildEnv, absl::StrCat(seed_, ",1"));
  const std::string address = child.ReadLine(kWait);
  ASSERT_FALSE(address.empty());
  absl::Notification first_chunk;
  RankConfig config{.name = "gen"};
  config.hooks.after_receive_chunk = [&](RequestId, int64_t index) {
    if (index == 0) first_chunk.Notify();
  };
  absl::StatusOr<std::unique_ptr<TestRank>> gen = MakeRank(config, &clock_, 0);
  ASSERT_THAT(gen.status(), IsOk());
  std::mt19937_64 rng(seed_ + 7);
  const TestBlocks blocks =
      RandomBlocks(RequestId(50), kTokens, SmallDescriptor(), true, 64, 0, rng);
  ASSERT_THAT((**gen)->StartReceive(Receive(blocks, address, RequestId(1), absl::Minutes(5))),
              IsOk());
  ASSERT_TRUE(first_chunk.WaitForNotificationWithTimeout(kWait));
  child.Signal(SIGKILL);
  child.Reap();
  const std::vector<TransferEvent> events = AwaitEvents(**gen, 1, kWait);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT((**gen)->Poll(), IsEmpty());
  EXPECT_EQ((**gen)->InFlight(), 0);
}

TEST_F(GrpcTransceiverProcessTest, StoppedContextRankFailsAtTheDeadlineThenServesAgain) {
  SCOPED_TRACE(SeedTrace(seed_));
  SelfProcess child(kChildEnv, absl::StrCat(seed_, ",0"));
  const std::string address = child.ReadLine(kWait);
  ASSERT_FALSE(address.empty());
  absl::StatusOr<std::unique_ptr<TestRank>> gen = MakeRank({.name = "gen"}, &clock_, 0);
  ASSERT_THAT(gen.status(), IsOk());
  std::mt19937_64 rng(seed_ + 7);
  const TestBlocks stalled =
      RandomBlocks(RequestId(50), kTokens, SmallDescriptor(), true, 64, 0, rng);
  const TestBlocks later =
      RandomBlocks(RequestId(51), kTokens, SmallDescriptor(), true, 64, 0, rng);
  child.Signal(SIGSTOP);
  ASSERT_THAT(
      (**gen)->StartReceive(Receive(stalled, address, RequestId(1), absl::Milliseconds(500))),
      IsOk());
  std::vector<TransferEvent> events = AwaitEvents(**gen, 1, kWait);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded));

  child.Signal(SIGCONT);
  ASSERT_THAT((**gen)->StartReceive(Receive(later, address, RequestId(2), kWait)), IsOk());
  events = AwaitEvents(**gen, 1, kWait);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, IsOk());
  // The child's slabs are a function of the seed: rebuild them here to compare.
  absl::StatusOr<std::unique_ptr<TestRank>> replica = MakeRank({.name = "replica"}, &clock_, seed_);
  ASSERT_THAT(replica.status(), IsOk());
  EXPECT_THAT(CompareMovedBlocks(**replica, ChildClaims(seed_)[1], **gen, later, SmallDescriptor()),
              IsEmpty());
}

}  // namespace
}  // namespace lockstep::transfer

int main(int argc, char** argv) {
  if (const char* spec = std::getenv(lockstep::transfer::kChildEnv)) {
    return lockstep::transfer::RunChild(spec);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

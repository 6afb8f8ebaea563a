// A context rank in its own process, killed (SIGKILL) while a generation rank (this
// process) waits on it over UCX, over the transport UCX_TLS names (the BUILD file runs
// this test with shm and with tcp): (a) for a piece of a published offer (the offer
// answered, staging stopped after its first chunk; shm only), (b) for a session call's
// answer (staging stopped before it answers), (c) mid-fetch of the staged copy (the
// context rank's progress held after its gRPC Offer answered; tcp only, where the fetch
// needs that progress), (d) for the endpoint's handshake on the first pull from it (its
// progress held from the start; tcp only). Each receive, given 60 s, must end UNAVAILABLE naming
// the pull (the liveness check refused, or the endpoint's error); nothing is reported received of
// it; what was written before stays bit-exact, nothing outside the receives' blocks is
// touched; and a pull from a second, live context rank process then succeeds bit-exact.
// The child is this binary re-executed with LOCKSTEP_UCX_KILL_CHILD set (no UCX or gRPC
// state crosses a fork); it reports its address and then that the generation rank waits
// on it (its first liveness check came) over a pipe: no sleeps, no fixed ports.
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/poll_until.h"
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
using ::lockstep::testing::PollUntil;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::SelfProcess;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakeRank;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;
using testing::TouchedOutside;

constexpr char kChildEnv[] = "LOCKSTEP_UCX_KILL_CHILD";  // "<seed>,<mode>"
constexpr char kWaitingLine[] = "waiting";
// 25 target blocks of SmallDescriptor, staged in several 4 KiB chunks.
constexpr int64_t kTokens = 100;
constexpr int32_t kGenBlocks = 128;  // room for three disjoint receives
constexpr RequestId kFirst(7);       // pulled whole before the fault
constexpr RequestId kHeld(8);        // the pull the child is killed in
constexpr absl::Duration kWait = absl::Seconds(30);
constexpr absl::Duration kReceiveDeadline = absl::Seconds(60);

bool OverTcp() {
  const char* tls = std::getenv("UCX_TLS");
  return tls != nullptr && absl::StrContains(tls, "tcp");
}

// What the child does to the pull of kHeld.
enum class Mode : int {
  kServe = 0,         // nothing: a live context rank
  kHoldStaging = 1,   // stops staging before its second chunk (until aborted)
  kHoldProgress = 2,  // holds its worker's progress from its first chunk on
  kHoldWireUp = 3,    // holds its worker's progress from the start: no endpoint to it connects
};

// The claims the child offers, kFirst and kHeld; the same in both processes for a seed.
std::vector<TestBlocks> ChildClaims(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TestBlocks> claims;
  for (RequestId id : {kFirst, kHeld}) {
    claims.push_back(RandomBlocks(id, kTokens, SmallDescriptor(), /*draft=*/false, 64, 0, rng));
  }
  return claims;
}

// The child: a UCX context rank offering ChildClaims(seed); prints its address, then,
// once the pull of kHeld is held (`mode`) and a liveness check of the waiting generation
// rank came, kWaitingLine. Serves until its stdin closes (or a minute passes), then
// exits without tearing down: the parent usually kills it first.
int RunChild(const std::string& spec) {
  const size_t comma = spec.find(',');
  uint64_t seed = 0;
  int mode_number = 0;
  if (comma == std::string::npos || !absl::SimpleAtoi(spec.substr(0, comma), &seed) ||
      !absl::SimpleAtoi(spec.substr(comma + 1), &mode_number)) {
    return 2;
  }
  const Mode mode = static_cast<Mode>(mode_number);
  static absl::Notification held;
  static std::atomic<bool> hold_progress{false};
  RankConfig config{.name = "ctx child"};
  config.ucx = true;
  if (mode == Mode::kHoldStaging) {
    config.hooks.before_send_chunk = [](const SendChunkInfo& chunk, std::string*,
                                        const absl::Notification& abort) {
      if (chunk.id != kHeld || chunk.index != 1) return;
      held.Notify();
      abort.WaitForNotificationWithTimeout(absl::Minutes(1));
    };
  } else if (mode == Mode::kHoldWireUp) {
    hold_progress = true;
    config.ucx_hooks.hold_progress = [] { return hold_progress.load(); };
    held.Notify();
  } else if (mode == Mode::kHoldProgress) {
    config.ucx_hooks.hold_progress = [] { return hold_progress.load(); };
    config.hooks.before_send_chunk = [](const SendChunkInfo& chunk, std::string*,
                                        const absl::Notification&) {
      if (chunk.id != kHeld || chunk.index != 0) return;
      hold_progress = true;
      held.Notify();
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
  TestRank& context = **rank;
  std::thread watcher([&context] {
    if (!held.WaitForNotificationWithTimeout(absl::Minutes(1))) return;
    const int64_t before = context->ucx_data_plane()->stats().liveness_checks;
    if (PollUntil([&] { return context->ucx_data_plane()->stats().liveness_checks > before; },
                  absl::Minutes(1))) {
      std::printf("%s\n", kWaitingLine);
      std::fflush(stdout);
    }
  });
  watcher.detach();
  pollfd in{.fd = 0, .events = POLLIN, .revents = 0};
  poll(&in, 1, 60'000);  // returns when the parent closes the pipe (or dies)
  std::_Exit(0);         // the watcher may still wait; nothing here needs an orderly end
}

class UcxKilledContextRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = TestSeed();
    std::mt19937_64 rng(seed_);
    free_.resize(kGenBlocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng);
  }

  // The generation rank: UCX on, `no_published` / `no_sessions` as an earlier version.
  std::unique_ptr<TestRank> Gen(bool no_published, bool no_sessions) {
    RankConfig config{.name = "gen", .num_blocks = kGenBlocks};
    config.ucx = true;
    config.ucx_hooks.no_published = no_published;
    config.ucx_hooks.no_sessions = no_sessions;
    absl::StatusOr<std::unique_ptr<TestRank>> gen = MakeRank(config, &clock_, 0);
    EXPECT_THAT(gen.status(), IsOk());
    return gen.ok() ? std::move(*gen) : nullptr;
  }

  // Blocks of local request `id` for kTokens tokens, disjoint from every earlier call's.
  TestBlocks Local(RequestId id) {
    TestBlocks b;
    b.id = id;
    b.generation = 1000 + static_cast<uint64_t>(id.value());
    b.num_tokens = kTokens;
    for (int64_t i = 0; i < SmallDescriptor().target->BlocksFor(kTokens); ++i) {
      b.blocks.push_back(BlockId(free_.back()));
      free_.pop_back();
    }
    return b;
  }

  absl::Status StartReceive(TestRank& gen, const TestBlocks& blocks, const std::string& address,
                            RequestId remote, absl::Duration timeout) {
    ReceiveSpec spec;
    spec.blocks = blocks;
    spec.num_tokens = blocks.num_tokens;
    spec.source.instance = "ctx child";
    spec.source.address = address;
    spec.source.request_id = remote;
    spec.deadline = clock_.Now() + timeout;
    return gen->StartReceive(spec);
  }

  // The differences between what the child of `seed` offered as `remote` and `local`.
  std::vector<std::string> Compare(uint64_t seed, RequestId remote, const TestRank& gen,
                                   const TestBlocks& local) {
    // The child's pools are a function of its seed: rebuilt here to compare.
    absl::StatusOr<std::unique_ptr<TestRank>> replica =
        MakeRank({.name = "replica"}, &clock_, seed);
    if (!replica.ok()) return {absl::StrCat("no replica: ", replica.status().ToString())};
    const std::vector<TestBlocks> claims = ChildClaims(seed);
    const TestBlocks& sent = remote == kFirst ? claims[0] : claims[1];
    return CompareMovedBlocks(**replica, sent, gen, local, SmallDescriptor());
  }

  // Pulls kFirst from the child of `seed` at `address` into `local`: OK and bit-exact.
  void PullWhole(TestRank& gen, uint64_t seed, const std::string& address,
                 const TestBlocks& local) {
    ASSERT_THAT(StartReceive(gen, local, address, kFirst, kWait), IsOk());
    const std::vector<TransferEvent> events = AwaitEvents(gen, 1, kWait);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].id, local.id);
    EXPECT_THAT(events[0].status, IsOk());
    EXPECT_THAT(Compare(seed, kFirst, gen, local), IsEmpty());
  }

  // The whole case: a child in `mode` serves kFirst whole to a generation rank
  // (`no_published`, `no_sessions`; not when `first_pull` is false, the child's first
  // pull then the one held), then is killed once that rank waits on its pull of kHeld;
  // the receive must fail UNAVAILABLE with one of `causes` in its message, and the rank
  // keep serving.
  void KillWhileWaiting(Mode mode, bool no_published, bool no_sessions,
                        const std::vector<const char*>& causes, bool first_pull = true) {
    SCOPED_TRACE(SeedTrace(seed_));
    std::unique_ptr<TestRank> gen = Gen(no_published, no_sessions);
    ASSERT_NE(gen, nullptr);
    const TestBlocks first = Local(RequestId(40));
    const TestBlocks failed = Local(RequestId(41));
    const TestBlocks later = Local(RequestId(42));
    {
      SelfProcess held(kChildEnv, absl::StrCat(seed_, ",", static_cast<int>(mode)));
      const std::string address = held.ReadLine(kWait);
      ASSERT_FALSE(address.empty()) << "the child did not start";
      // Over the gRPC Offer: the endpoint, the session and (shm) the mapping are set up.
      if (first_pull) PullWhole(*gen, seed_, address, first);
      ASSERT_THAT(StartReceive(*gen, failed, address, kHeld, kReceiveDeadline), IsOk());
      ASSERT_EQ(held.ReadLine(kWait), kWaitingLine) << "the pull was not held";
      held.Signal(SIGKILL);
      held.Reap();
      const std::vector<TransferEvent> events =
          AwaitEvents(*gen, 1, kReceiveDeadline + absl::Seconds(15));
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0].id, failed.id);
      // Not at the deadline: the liveness check refused, or the endpoint's error.
      EXPECT_THAT(events[0].status,
                  StatusIs(absl::StatusCode::kUnavailable, HasSubstr("pull of request 8 from")));
      std::vector<::testing::Matcher<std::string>> named;
      for (const char* cause : causes) named.push_back(HasSubstr(cause));
      EXPECT_THAT(std::string(events[0].status.message()), ::testing::AnyOfArray(named));
      EXPECT_THAT((*gen)->Poll(), IsEmpty());
      EXPECT_EQ((*gen)->InFlight(), 0);
    }
    // What was written before is intact, and the rank serves a live context rank.
    if (first_pull) EXPECT_THAT(Compare(seed_, kFirst, *gen, first), IsEmpty());
    SelfProcess live(kChildEnv, absl::StrCat(seed_ + 1, ",", static_cast<int>(Mode::kServe)));
    const std::string address = live.ReadLine(kWait);
    ASSERT_FALSE(address.empty()) << "the second child did not start";
    PullWhole(*gen, seed_ + 1, address, later);
    EXPECT_THAT((*gen)->Poll(), IsEmpty());  // nothing late of the failed receive
    EXPECT_THAT(TouchedOutside(*gen, {first, failed, later}, SmallDescriptor()), IsEmpty());
    EXPECT_EQ((*gen)->InFlight(), 0);
  }

  uint64_t seed_ = 0;
  FakeClock clock_;
  std::vector<int32_t> free_;  // the generation rank's target blocks not yet handed out
};

// (a) The offer answered before staging (published), its second piece waited for.
TEST_F(UcxKilledContextRankTest, KilledWhileAPublishedPieceIsAwaited) {
  if (OverTcp()) GTEST_SKIP() << "no published offers without shared memory";
  KillWhileWaiting(Mode::kHoldStaging, /*no_published=*/false, /*no_sessions=*/false,
                   {"the context rank is gone"});
}

// (b) A session Offer's answer waited for (no published offers: answered after staging).
TEST_F(UcxKilledContextRankTest, KilledWhileASessionCallIsAwaited) {
  KillWhileWaiting(Mode::kHoldStaging, /*no_published=*/true, /*no_sessions=*/false,
                   {"the context rank is gone", "the UCX call to the context rank failed"});
}

// (c) The fetch of the staged copy waited for (the Offer over gRPC, answered).
TEST_F(UcxKilledContextRankTest, KilledMidFetch) {
  if (!OverTcp()) GTEST_SKIP() << "over shared memory a get needs no progress of the peer";
  KillWhileWaiting(Mode::kHoldProgress, /*no_published=*/true, /*no_sessions=*/true,
                   {"the context rank is gone", "the UCX read from the context rank failed"});
}

// (d) The first pull from a context rank whose worker never progressed: the fetch waits
// for the endpoint's handshake (UCX's wire-up and our ping) when the rank is killed.
TEST_F(UcxKilledContextRankTest, KilledWhileTheEndpointConnects) {
  if (!OverTcp()) GTEST_SKIP() << "over shared memory the copy is mapped without the peer";
  KillWhileWaiting(Mode::kHoldWireUp, /*no_published=*/true, /*no_sessions=*/true,
                   {"the context rank is gone", "the UCX read from the context rank failed"},
                   /*first_pull=*/false);
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

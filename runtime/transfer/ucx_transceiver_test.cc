// GrpcTransceiver with the UCX data plane (ucx_*.h): a context rank and a generation
// rank in one process, over the UCX transports UCX_TLS names (the BUILD file runs this
// test with shm and with tcp). Transfers, the fallbacks to the TCP data plane, and the
// faults: a registration failure, a full staging area, a get that never completes, the
// context rank gone mid-get or slow but live, a cancel mid-get; the session calls after a
// connection's first Offer, ranks without them, and their faults (a bad key, no answer by
// the deadline, the context rank gone mid-call, a slow but live one); sessions expired or
// evicted; a Release of another requester's offer; an offer never released.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/poll_until.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/kv_puller.h"
#include "runtime/transfer/testing/transfer_fixture.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::PollUntil;
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
using testing::TouchedOutside;

constexpr absl::Duration kWait = absl::Seconds(20);

// Whether UCX carries the bytes over TCP, where an RMA get is emulated with active
// messages that the context rank's progress thread serves (so holding that thread
// stalls a get); over shared memory (cma) a get completes without it.
bool OverTcp() {
  const char* tls = std::getenv("UCX_TLS");
  return tls != nullptr && absl::StrContains(tls, "tcp");
}

// A context rank's progress held on demand (UcxWorkerHooks::hold_progress): Engage
// returns once its progress thread has seen the hold, so that from then on nothing of
// its worker is progressed until `on` is false.
struct ProgressHold {
  std::function<bool()> Hook() {
    return [this] {
      if (!on.load()) return false;
      ++seen;
      return true;
    };
  }
  bool Engage() {
    on = true;
    const int before = seen.load();
    return PollUntil([&] { return seen.load() > before; });
  }
  std::atomic<bool> on{false};
  std::atomic<int> seen{0};
};

class UcxTransceiverTest : public testing::TransportTest {
 protected:
  static RankConfig Config(const char* name, bool ucx) {
    RankConfig config{.name = name, .descriptor = SmallDescriptor()};
    config.ucx = ucx;
    return config;
  }

  // Moves request `from`'s 23 target blocks of `ctx` into request `to` of `gen`, with
  // `timeout`: the receive's status (the blocks are compared when it is OK).
  absl::Status Move(TestRank& ctx, TestRank& gen, int64_t from, int64_t to,
                    absl::Duration timeout = kWait) {
    const KvDescriptor d = SmallDescriptor();
    const TestBlocks sent = RandomBlocks(RequestId(from), 23, d, /*draft=*/false, 64, 0, rng_);
    const TestBlocks received = RandomBlocks(RequestId(to), 23, d, /*draft=*/false, 64, 0, rng_);
    if (absl::Status s = ctx->StartSend(Send(sent)); !s.ok()) return s;
    if (absl::Status s = gen->StartReceive(Receive(received, ctx, sent.id, timeout)); !s.ok()) {
      return s;
    }
    const std::vector<TransferEvent> got = AwaitEvents(gen, 1, kWait);
    if (got.size() != 1) return absl::InternalError("the receive reported no event");
    if (got[0].status.ok()) EXPECT_THAT(CompareMovedBlocks(ctx, sent, gen, received, d), IsEmpty());
    return got[0].status;
  }

  // `gen`'s one event: OK, with `received` holding `sent`'s blocks bit-exact.
  void ExpectReceivedBitExact(TestRank& ctx, TestRank& gen, const TestBlocks& sent,
                              const TestBlocks& received) {
    const std::vector<TransferEvent> got = AwaitEvents(gen, 1, kWait);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_THAT(got[0].status, IsOk());
    EXPECT_THAT(CompareMovedBlocks(ctx, sent, gen, received, SmallDescriptor()), IsEmpty());
  }

  // A context rank whose progress `hold` stops and a generation rank (`gen_config`)
  // holding a session with it: request 7 moved as 40 over UCX, the context's staged copy
  // released, then the hold engaged. False (with a test failure) where a step failed.
  bool StartHeldSession(ProgressHold& hold, RankConfig gen_config, std::unique_ptr<TestRank>* ctx,
                        std::unique_ptr<TestRank>* gen) {
    RankConfig config = Config("ctx0 rank 0", true);
    config.ucx_hooks.hold_progress = hold.Hook();
    *ctx = Rank(config, seed_ + 1);
    *gen = Rank(std::move(gen_config), 0);
    if (*ctx == nullptr || *gen == nullptr) {
      ADD_FAILURE() << "a rank did not start";
      return false;
    }
    if (absl::Status moved = Move(**ctx, **gen, 7, 40); !moved.ok()) {
      ADD_FAILURE() << "the first pull: " << moved;
      return false;
    }
    TestRank& context = **ctx;
    if (!PollUntil([&] { return context->ucx_data_plane()->stats().released == 1; })) {
      ADD_FAILURE() << "the first pull's copy was not released";
      return false;
    }
    if (!hold.Engage()) {
      ADD_FAILURE() << "the context rank's progress thread did not see the hold";
      return false;
    }
    return true;
  }

  // A get held up: a context rank whose progress thread does not run while `hold`, a
  // generation rank that notifies `getting` as its first get or mapped read begins (with
  // `map` false it reads nothing in place: over shared memory its reads then wait for
  // the held context rank too, in their endpoint's handshake), and request 7's 23 target
  // blocks staged by the context rank, to be received as request 40. The ranks go first
  // on destruction (their hooks point at `hold` and `getting`).
  struct HeldGet {
    std::atomic<bool> hold{true};
    absl::Notification getting;
    std::unique_ptr<TestRank> ctx;
    std::unique_ptr<TestRank> gen;
    TestBlocks sent;
    TestBlocks received;
  };
  // Null (with a test failure) when a rank or the send cannot start.
  std::unique_ptr<HeldGet> StartHeldGet(bool map = true) {
    auto held = std::make_unique<HeldGet>();
    HeldGet* h = held.get();
    RankConfig config = Config("ctx0 rank 0", true);
    config.ucx_hooks.hold_progress = [h] { return h->hold.load(); };
    h->ctx = Rank(config, seed_ + 1);
    RankConfig gen_config = Config("gen0 rank 1", true);
    gen_config.ucx_hooks.before_get = [h] {
      if (!h->getting.HasBeenNotified()) h->getting.Notify();
    };
    gen_config.ucx_hooks.no_mapping = !map;
    h->gen = Rank(gen_config, 0);
    if (h->ctx == nullptr || h->gen == nullptr) {
      ADD_FAILURE() << "a rank did not start";
      return nullptr;
    }
    const KvDescriptor d = SmallDescriptor();
    h->sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/false, 64, 0, rng_);
    h->received = RandomBlocks(RequestId(40), 23, d, /*draft=*/false, 64, 0, rng_);
    if (absl::Status sent = (*h->ctx)->StartSend(Send(h->sent)); !sent.ok()) {
      ADD_FAILURE() << "StartSend: " << sent;
      return nullptr;
    }
    return held;
  }
};

TEST_P(UcxTransceiverTest, MovesTargetAndDraftBlocksBitExact) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank(Config("ctx0 rank 0", true), seed_ + 1);
  RankConfig gen_config = Config("gen0 rank 1", true);
  // Deferred Releases go only with a later call or at shutdown: the counts below do not
  // depend on how fast the test runs.
  gen_config.ucx_hooks.release_linger = absl::InfiniteDuration();  // over shm
  auto gen = Rank(gen_config, 0);
  ASSERT_TRUE(ctx && gen);
  std::vector<TestBlocks> all_received;
  for (int i = 0; i < 3; ++i) {  // the endpoint is reused
    const TestBlocks sent = RandomBlocks(RequestId(7 + i), 23, d, /*draft=*/true, 64, 0, rng_);
    const TestBlocks received = RandomBlocks(RequestId(40 + i), 23, d, /*draft=*/true, 64, 2, rng_);
    ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
    ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
    const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, received.id);
    EXPECT_THAT(got[0].status, IsOk());
    const std::vector<TransferEvent> sent_events = AwaitEvents(*ctx, 1, kWait);
    ASSERT_EQ(sent_events.size(), 1u);
    EXPECT_EQ(sent_events[0].id, sent.id);
    EXPECT_THAT(sent_events[0].status, IsOk());
    EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
    all_received.push_back(received);
    EXPECT_THAT(TouchedOutside(*gen, all_received, d), IsEmpty());
  }
  EXPECT_EQ((*gen)->pulls_over_ucx(), 3);
  EXPECT_EQ((*gen)->pulls_over_tcp() + (*gen)->pulls_over_grpc(), 0);
  if (OverTcp()) {
    // A copy fetched (not mapped) is released by a call of its own once its receive
    // was reported.
    EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 3; }));
  } else {
    // At least the last copy read in place waits for its Release, deferred to the next
    // call; the generation rank's shutdown sends what no Offer carried, in one call.
    EXPECT_GE((*ctx)->ucx_data_plane()->stats().offers, 1);
    gen->transceiver.reset();
  }
  const UcxDataServer::Stats stats = (*ctx)->ucx_data_plane()->stats();
  EXPECT_EQ(stats.released, 3);
  EXPECT_EQ(stats.offers, 0);
  EXPECT_EQ(stats.staged_bytes, 0);
  // The first Offer went over gRPC, the later two over the session; then over tcp three
  // Release calls, in place two of the Releases carried by those Offers or by the one
  // call at shutdown, after its first.
  EXPECT_EQ(stats.session_calls, OverTcp() ? 5 : 3);
  EXPECT_EQ(stats.released_deferred, OverTcp() ? 0 : 2);
  EXPECT_EQ(stats.session_refused, 0);
}

// A pull's deferred Release that no later call carries goes on its own once the linger
// has passed: the staged copy does not wait for its deadline. (Over tcp it is not
// deferred: the same single call.)
TEST_P(UcxTransceiverTest, ADeferredReleaseGoesOnItsOwnAfterTheLinger) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = Rank(Config("ctx0 rank 0", true), seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  ASSERT_THAT(Move(*ctx, *gen, 7, 40), IsOk());
  EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 1; }));
  const UcxDataServer::Stats stats = (*ctx)->ucx_data_plane()->stats();
  EXPECT_EQ(stats.offers, 0);
  EXPECT_EQ(stats.session_calls, 1);  // the Release (the Offer went over gRPC)
  EXPECT_EQ(stats.released_deferred, 0);
}

// A rank of an earlier version on either side (no deferred Releases): every staged
// copy is released by a call of its own once its receive is reported, as before.
TEST_P(UcxTransceiverTest, RanksWithoutDeferredReleasesReleaseEachCopyAtOnce) {
  SCOPED_TRACE(SeedTrace(seed_));
  for (bool old_context : {true, false}) {
    SCOPED_TRACE(old_context ? "context rank without them" : "generation rank without them");
    RankConfig ctx_config = Config("ctx0 rank 0", true);
    ctx_config.ucx_hooks.no_deferred_releases = old_context;
    RankConfig gen_config = Config("gen0 rank 1", true);
    gen_config.ucx_hooks.no_deferred_releases = !old_context;
    gen_config.ucx_hooks.release_linger = absl::InfiniteDuration();
    auto ctx = Rank(ctx_config, seed_ + 1);
    auto gen = Rank(gen_config, 0);
    ASSERT_TRUE(ctx && gen);
    for (int i = 0; i < 3; ++i) ASSERT_THAT(Move(*ctx, *gen, 7 + i, 40 + i), IsOk());
    EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 3; }));
    const UcxDataServer::Stats stats = (*ctx)->ucx_data_plane()->stats();
    EXPECT_EQ(stats.offers, 0);
    // Two session Offers and three Releases.
    EXPECT_EQ(stats.session_calls, 5);
    EXPECT_EQ(stats.released_deferred, 0);
  }
}

// A rank of an earlier version on either side (no sessions): every Offer and Release
// goes over gRPC, and the pulls are as before.
TEST_P(UcxTransceiverTest, RanksWithoutSessionsKeepCallingOverGrpc) {
  SCOPED_TRACE(SeedTrace(seed_));
  for (bool old_context : {true, false}) {
    SCOPED_TRACE(old_context ? "context rank without sessions" : "generation rank without them");
    RankConfig ctx_config = Config("ctx0 rank 0", true);
    ctx_config.ucx_hooks.no_sessions = old_context;
    RankConfig gen_config = Config("gen0 rank 1", true);
    gen_config.ucx_hooks.no_sessions = !old_context;
    auto ctx = Rank(ctx_config, seed_ + 1);
    auto gen = Rank(gen_config, 0);
    ASSERT_TRUE(ctx && gen);
    EXPECT_THAT(Move(*ctx, *gen, 7, 40), IsOk());
    EXPECT_THAT(Move(*ctx, *gen, 8, 41), IsOk());
    EXPECT_EQ((*gen)->pulls_over_ucx(), 2);
    EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 2; }));
    EXPECT_EQ((*ctx)->ucx_data_plane()->stats().session_calls, 0);
  }
}

// A session call with a wrong key, for no session, or malformed is answered with an error
// naming the problem, and touches no claim.
TEST_P(UcxTransceiverTest, ABadSessionCallIsRefusedAndTouchesNoClaim) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = Rank(Config("ctx0 rank 0", true), seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  ASSERT_THAT(Move(*ctx, *gen, 7, 40), IsOk());  // gen0 rank 1 now holds a session
  const TestBlocks sent =
      RandomBlocks(RequestId(8), 23, SmallDescriptor(), /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  absl::StatusOr<std::shared_ptr<UcxWorker>> intruder = UcxWorker::Create("intruder");
  ASSERT_THAT(intruder.status(), IsOk());
  const auto call = [&](const std::string& requester, const std::string& key) {
    lockstep::v1::UcxSessionCall request;
    request.set_session_key(key);
    request.set_timeout_micros(absl::ToInt64Microseconds(kWait));
    request.mutable_offer()->set_context_request_id(8);
    request.mutable_offer()->set_requester(requester);
    return (*intruder)->Call((*ctx)->ucx_data_plane()->worker_address(),
                             request.SerializeAsString(), absl::Now() + kWait, nullptr);
  };
  const auto answer_of = [](const absl::StatusOr<std::string>& answered) {
    lockstep::v1::UcxSessionAnswer answer;
    EXPECT_THAT(answered.status(), IsOk());
    if (answered.ok()) EXPECT_TRUE(answer.ParseFromString(*answered));
    return answer;
  };
  lockstep::v1::UcxSessionAnswer answer = answer_of(call("gen0 rank 1", std::string(64, '0')));
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(answer.message(), HasSubstr("UCX session key of gen0 rank 1 does not match"));
  EXPECT_FALSE(answer.has_offer());
  answer = answer_of(call("gen9 rank 0", ""));
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(answer.message(), HasSubstr("no UCX session of gen9 rank 0"));
  answer = answer_of((*intruder)->Call((*ctx)->ucx_data_plane()->worker_address(), "\xff\xff",
                                       absl::Now() + kWait, nullptr));
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(answer.message(), HasSubstr("malformed UCX session call"));
  EXPECT_EQ((*ctx)->ucx_data_plane()->stats().session_refused, 2);
  // Request 8's claim is intact: the generation rank pulls it over its session.
  const TestBlocks received = RandomBlocks(RequestId(41), 23, SmallDescriptor(),
                                           /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  ExpectReceivedBitExact(*ctx, *gen, sent, received);
  // Over the session: request 7's Release, 8's Offer and 8's Release.
  EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 2; }));
  EXPECT_EQ((*ctx)->ucx_data_plane()->stats().session_calls, 3);
}

// A session Offer the context rank does not answer (its worker not progressed) fails
// the receive at its deadline; the session is dropped and the next pull offers over gRPC.
TEST_P(UcxTransceiverTest, ASessionOfferUnansweredByItsDeadlineFailsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  ProgressHold hold;
  std::unique_ptr<TestRank> ctx, gen;
  ASSERT_TRUE(StartHeldSession(hold, Config("gen0 rank 1", true), &ctx, &gen));
  const absl::Duration timeout = absl::Milliseconds(800);
  const absl::Time start = absl::Now();
  EXPECT_THAT(Move(*ctx, *gen, 8, 41, timeout),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("UCX call of")));
  EXPECT_LT(absl::Now() - start, timeout + absl::Seconds(3));
  hold.on = false;
  EXPECT_THAT(Move(*ctx, *gen, 9, 42), IsOk());
  EXPECT_EQ((*gen)->pulls_over_ucx(), 3);
  EXPECT_EQ((*gen)->ucx_fallbacks(), 0);
}

// The context rank goes away while a session Offer waits for its answer: the receive
// fails UNAVAILABLE, with the pull named, long before its 60 s deadline (an endpoint
// error over tcp; over shared memory, which detects no dead peer, the liveness check's
// refused gRPC connection), not DEADLINE_EXCEEDED.
TEST_P(UcxTransceiverTest, ContextRankGoneMidSessionOfferFailsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  ProgressHold hold;
  std::atomic<int> sent_calls{0};
  RankConfig gen_config = Config("gen0 rank 1", true);
  gen_config.ucx_hooks.before_get = [&sent_calls] { ++sent_calls; };
  std::unique_ptr<TestRank> ctx, gen;
  ASSERT_TRUE(StartHeldSession(hold, std::move(gen_config), &ctx, &gen));
  const TestBlocks sent =
      RandomBlocks(RequestId(8), 23, SmallDescriptor(), /*draft=*/false, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(41), 23, SmallDescriptor(),
                                           /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  const int before = sent_calls.load();
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id, absl::Seconds(60))), IsOk());
  ASSERT_TRUE(PollUntil([&] { return sent_calls.load() > before; }));  // the Offer is sent
  ctx.reset();
  // Waited for past the deadline: a receive that ran into it fails DEADLINE_EXCEEDED.
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, absl::Seconds(75));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("pull of request 8 from")));
}

// A live context rank slow to answer a session Offer (its worker held past the liveness
// grace, while its gRPC port answers the checks) is waited for: the receive succeeds.
TEST_P(UcxTransceiverTest, ASlowButLiveContextRankIsWaitedFor) {
  SCOPED_TRACE(SeedTrace(seed_));
  ProgressHold hold;
  std::unique_ptr<TestRank> ctx, gen;
  ASSERT_TRUE(StartHeldSession(hold, Config("gen0 rank 1", true), &ctx, &gen));
  const TestBlocks sent =
      RandomBlocks(RequestId(8), 23, SmallDescriptor(), /*draft=*/false, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(41), 23, SmallDescriptor(),
                                           /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id, absl::Seconds(60))), IsOk());
  // Two liveness checks answered while the Offer waits, then its answer.
  EXPECT_TRUE(
      PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().liveness_checks >= 2; }, kWait));
  hold.on = false;
  ExpectReceivedBitExact(*ctx, *gen, sent, received);
  // Over the session: 7's Release, then 8's Offer and Release.
  EXPECT_TRUE(PollUntil([&] { return (*ctx)->ucx_data_plane()->stats().released == 2; }));
  EXPECT_EQ((*ctx)->ucx_data_plane()->stats().session_calls, 3);
  EXPECT_EQ((*gen)->ucx_fallbacks(), 0);
}

TEST_P(UcxTransceiverTest, FallsBackWhereTheContextRankHasNoUcx) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank(Config("ctx0 rank 0", false), seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/false, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  EXPECT_EQ((*gen)->ucx_fallbacks(), 1);
  EXPECT_EQ((*gen)->pulls_over_ucx(), 0);
  EXPECT_EQ((*gen)->pulls_over_tcp(), 1);
}

TEST_P(UcxTransceiverTest, RegistrationFailureFallsBackWithTheClaimIntact) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  RankConfig config = Config("ctx0 rank 0", true);
  config.ucx_hooks.fail_registration = [] {
    return absl::ResourceExhaustedError("cannot pin the staging memory");
  };
  auto ctx = Rank(config, seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/true, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  EXPECT_EQ((*gen)->ucx_fallbacks(), 1);
  EXPECT_EQ((*ctx)->ucx_data_plane()->stats().refused, 1);
  const std::vector<TransferEvent> sent_events = AwaitEvents(*ctx, 1, kWait);
  ASSERT_EQ(sent_events.size(), 1u);
  EXPECT_THAT(sent_events[0].status, IsOk());
}

TEST_P(UcxTransceiverTest, FullStagingFallsBack) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  RankConfig config = Config("ctx0 rank 0", true);
  config.ucx_server.max_staged_bytes = 1024;  // less than one request's blocks
  auto ctx = Rank(config, seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/false, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  EXPECT_EQ((*gen)->ucx_fallbacks(), 1);
  EXPECT_EQ((*ctx)->ucx_data_plane()->stats().refused, 1);
}

TEST_P(UcxTransceiverTest, GetThatNeverCompletesFailsAtItsDeadline) {
  SCOPED_TRACE(SeedTrace(seed_));
  std::unique_ptr<HeldGet> held = StartHeldGet();
  ASSERT_NE(held, nullptr);
  TestRank& gen = *held->gen;
  const absl::Duration timeout = absl::Milliseconds(800);
  const absl::Time start = absl::Now();
  ASSERT_THAT(gen->StartReceive(Receive(held->received, *held->ctx, held->sent.id, timeout)),
              IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(absl::Now() - start, timeout + absl::Seconds(3));  // ended near its deadline
  if (OverTcp()) {
    EXPECT_THAT(got[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                        HasSubstr("did not complete by its deadline")));
    EXPECT_THAT(got[0].status.message(), HasSubstr("pull of request 7 from"));
  }
  held->hold = false;
  EXPECT_EQ(gen->pulls_over_ucx(), 1);  // no fallback once the offer was made
}

// The context rank goes away while the read of its staged copy waits for it (held: the
// read's endpoint handshake, or over tcp the fetch itself): the receive fails
// UNAVAILABLE, with the pull named, long before its 60 s deadline (the liveness check's
// refused gRPC connection, or over tcp the endpoint's error), not DEADLINE_EXCEEDED —
// over shared memory too, which detects no dead peer of its own. Nothing is read in
// place (over shared memory that waits for nothing).
TEST_P(UcxTransceiverTest, ContextRankGoneMidGetFailsTheReceive) {
  SCOPED_TRACE(SeedTrace(seed_));
  std::unique_ptr<HeldGet> held = StartHeldGet(/*map=*/false);
  ASSERT_NE(held, nullptr);
  TestRank& gen = *held->gen;
  ASSERT_THAT(
      gen->StartReceive(Receive(held->received, *held->ctx, held->sent.id, absl::Seconds(60))),
      IsOk());
  // The read waits: its first liveness check reached the context rank.
  ASSERT_TRUE(PollUntil(
      [&] { return (*held->ctx)->ucx_data_plane()->stats().liveness_checks >= 1; }, kWait));
  held->ctx.reset();  // the context rank's process is gone: its worker and staged copy too
  // Waited for past the deadline: a receive that ran into it fails DEADLINE_EXCEEDED.
  const std::vector<TransferEvent> got = AwaitEvents(gen, 1, absl::Seconds(75));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("pull of request 7 from")));
}

// A live context rank slow to serve the read of its staged copy (its worker held past
// the liveness grace, while its gRPC port answers the checks) is waited for: the receive
// succeeds bit-exact, over UCX.
TEST_P(UcxTransceiverTest, ASlowButLiveContextRankIsWaitedForMidGet) {
  SCOPED_TRACE(SeedTrace(seed_));
  std::unique_ptr<HeldGet> held = StartHeldGet(/*map=*/false);
  ASSERT_NE(held, nullptr);
  TestRank& gen = *held->gen;
  ASSERT_THAT(
      gen->StartReceive(Receive(held->received, *held->ctx, held->sent.id, absl::Seconds(60))),
      IsOk());
  EXPECT_TRUE(PollUntil(
      [&] { return (*held->ctx)->ucx_data_plane()->stats().liveness_checks >= 2; }, kWait));
  held->hold = false;
  ExpectReceivedBitExact(*held->ctx, gen, held->sent, held->received);
  EXPECT_EQ(gen->pulls_over_ucx(), 1);
  EXPECT_EQ(gen->ucx_fallbacks(), 0);
}

TEST_P(UcxTransceiverTest, CancelMidGetEndsTheReceiveCancelled) {
  SCOPED_TRACE(SeedTrace(seed_));
  std::unique_ptr<HeldGet> held = StartHeldGet();
  ASSERT_NE(held, nullptr);
  TestRank& gen = *held->gen;
  ASSERT_THAT(gen->StartReceive(Receive(held->received, *held->ctx, held->sent.id)), IsOk());
  ASSERT_TRUE(held->getting.WaitForNotificationWithTimeout(kWait));
  gen->Cancel(held->received.id);
  const std::vector<TransferEvent> got = AwaitEvents(gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  if (OverTcp()) EXPECT_THAT(got[0].status, StatusIs(absl::StatusCode::kCancelled));
  held->hold = false;
  // Nothing is written after a cancel: the blocks keep their fill (the sentinel).
  if (absl::IsCancelled(got[0].status)) {
    EXPECT_THAT(TouchedOutside(gen, {}, SmallDescriptor()), IsEmpty());
  }
}

// A session key unused past its lifetime (on the context rank's injected clock) is
// dropped: the next session Offer is refused and the generation rank offers over gRPC
// for a new key within the same receive. No pull fails or falls back; a key in use is
// kept past its lifetime from when it was made (idleness, not age).
TEST_P(UcxTransceiverTest, AnExpiredSessionIsOfferedAgainOverGrpc) {
  SCOPED_TRACE(SeedTrace(seed_));
  FakeClock sessions;
  RankConfig config = Config("ctx0 rank 0", true);
  config.ucx_server.clock = &sessions;
  config.ucx_server.session_idle_lifetime = absl::Minutes(1);
  auto ctx = Rank(config, seed_ + 1);
  auto gen = Rank(Config("gen0 rank 1", true), 0);
  ASSERT_TRUE(ctx && gen);
  const auto stats = [&] { return (*ctx)->ucx_data_plane()->stats(); };
  ASSERT_THAT(Move(*ctx, *gen, 7, 40), IsOk());  // the key is made; 7's Release uses it
  ASSERT_TRUE(PollUntil([&] { return stats().released == 1; }));
  sessions.Advance(absl::Minutes(2));
  EXPECT_THAT(Move(*ctx, *gen, 8, 41), IsOk());  // refused as expired, then over gRPC
  ASSERT_TRUE(PollUntil([&] { return stats().released == 2; }));
  EXPECT_EQ(stats().sessions_expired, 1);
  EXPECT_EQ(stats().session_refused, 1);
  EXPECT_EQ(stats().session_calls, 2);  // the Releases of 7 and 8
  // Used every 50 s: kept, though made more than a lifetime before the last pull.
  for (int i = 0; i < 2; ++i) {
    sessions.Advance(absl::Seconds(50));
    EXPECT_THAT(Move(*ctx, *gen, 9 + i, 42 + i), IsOk());
    ASSERT_TRUE(PollUntil([&] { return stats().released == 3 + i; }));
  }
  EXPECT_EQ(stats().session_calls, 6);
  EXPECT_EQ(stats().sessions_expired, 1);
  EXPECT_EQ((*gen)->pulls_over_ucx(), 4);
  EXPECT_EQ((*gen)->ucx_fallbacks(), 0);
}

// Past max_sessions, a new requester's key takes the place of the one unused longest:
// that requester's next session Offer is refused and it offers over gRPC again (taking
// the place of the other's in turn). No pull fails or falls back.
TEST_P(UcxTransceiverTest, ASessionEvictedForANewRequesterIsOfferedAgainOverGrpc) {
  SCOPED_TRACE(SeedTrace(seed_));
  RankConfig config = Config("ctx0 rank 0", true);
  config.ucx_server.max_sessions = 1;
  auto ctx = Rank(config, seed_ + 1);
  auto first = Rank(Config("gen0 rank 1", true), 0);
  auto second = Rank(Config("gen1 rank 0", true), 0);
  ASSERT_TRUE(ctx && first && second);
  const auto stats = [&] { return (*ctx)->ucx_data_plane()->stats(); };
  ASSERT_THAT(Move(*ctx, *first, 7, 40), IsOk());
  ASSERT_TRUE(PollUntil([&] { return stats().released == 1; }));
  ASSERT_THAT(Move(*ctx, *second, 8, 41), IsOk());  // evicts gen0 rank 1's key
  ASSERT_TRUE(PollUntil([&] { return stats().released == 2; }));
  EXPECT_EQ(stats().sessions_evicted, 1);
  EXPECT_THAT(Move(*ctx, *first, 9, 42), IsOk());  // refused, then over gRPC: evicts gen1's
  ASSERT_TRUE(PollUntil([&] { return stats().released == 3; }));
  EXPECT_EQ(stats().sessions_evicted, 2);
  EXPECT_EQ(stats().session_refused, 1);
  EXPECT_EQ(stats().session_calls, 3);  // the three Releases
  EXPECT_EQ((*first)->pulls_over_ucx() + (*second)->pulls_over_ucx(), 3);
  EXPECT_EQ((*first)->ucx_fallbacks() + (*second)->ucx_fallbacks(), 0);
}

// A Release of an offer made to another requester is refused PERMISSION_DENIED naming
// the offer, over gRPC and as a session call alike, and the copy stays staged; its
// owner's Release (either way) frees it.
TEST_P(UcxTransceiverTest, AReleaseOfAnotherRequestersOfferIsRefused) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = Rank(Config("ctx0 rank 0", true), seed_ + 1);
  ASSERT_TRUE(ctx);
  std::unique_ptr<lockstep::v1::KvUcxService::Stub> stub = lockstep::v1::KvUcxService::NewStub(
      grpc::CreateChannel((*ctx)->address(), grpc::InsecureChannelCredentials()));
  absl::StatusOr<std::shared_ptr<UcxWorker>> caller = UcxWorker::Create("generation");
  ASSERT_THAT(caller.status(), IsOk());
  // Request `from` offered over gRPC to `requester`, as its puller would ask.
  const auto offer = [&](int64_t from, const std::string& requester) {
    const TestBlocks sent =
        RandomBlocks(RequestId(from), 23, SmallDescriptor(), /*draft=*/false, 64, 0, rng_);
    EXPECT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
    const KvPuller puller(SmallDescriptor(), KvCopiers{}, requester, TransferHooks{});
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    lockstep::v1::UcxOffer made;
    EXPECT_TRUE(stub->Offer(&context, puller.Request(Receive(sent, *ctx, sent.id)), &made).ok());
    EXPECT_THAT(made.refusal(), IsEmpty());
    return made;
  };
  const auto grpc_release = [&](uint64_t id, const std::string& requester) {
    lockstep::v1::UcxRelease release;
    release.set_offer_id(id);
    release.set_requester(requester);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    lockstep::v1::UcxReleaseReply reply;
    return stub->Release(&context, release, &reply);
  };
  // A session Release of offer `id` by `requester`, with its own session key, carrying
  // the deferred Releases `also`: the answer.
  const auto session_release = [&](uint64_t id, const std::string& requester,
                                   const std::string& key, std::vector<uint64_t> also = {}) {
    lockstep::v1::UcxSessionCall call;
    call.set_session_key(key);
    call.set_timeout_micros(absl::ToInt64Microseconds(kWait));
    call.mutable_release()->set_offer_id(id);
    call.mutable_release()->set_requester(requester);
    for (const uint64_t offer_id : also) call.add_also_release(offer_id);
    lockstep::v1::UcxSessionAnswer answer;
    const absl::StatusOr<std::string> answered =
        (*caller)->Call((*ctx)->ucx_data_plane()->worker_address(), call.SerializeAsString(),
                        absl::Now() + kWait, nullptr);
    EXPECT_THAT(answered.status(), IsOk());
    if (answered.ok()) EXPECT_TRUE(answer.ParseFromString(*answered));
    return answer;
  };
  const lockstep::v1::UcxOffer mine = offer(7, "gen0 rank 1");
  const lockstep::v1::UcxOffer theirs = offer(8, "gen1 rank 0");
  ASSERT_FALSE(theirs.session_key().empty());
  const std::string names_mine = absl::StrCat("UCX offer ", mine.offer_id(), " was not made to");
  const grpc::Status refused = grpc_release(mine.offer_id(), "gen1 rank 0");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr(names_mine));
  const lockstep::v1::UcxSessionAnswer answer =
      session_release(mine.offer_id(), "gen1 rank 0", theirs.session_key());
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(answer.message(), HasSubstr(names_mine));
  UcxDataServer::Stats stats = (*ctx)->ucx_data_plane()->stats();
  EXPECT_EQ(stats.release_refused, 2);
  EXPECT_EQ(stats.offers, 2);  // both still staged
  EXPECT_EQ(stats.released, 0);
  // Nor may a call carry a deferred Release of it: that one is skipped, the call served.
  EXPECT_EQ(
      session_release(theirs.offer_id(), "gen1 rank 0", theirs.session_key(), {mine.offer_id()})
          .code(),
      0);
  stats = (*ctx)->ucx_data_plane()->stats();
  EXPECT_EQ(stats.release_refused, 3);
  EXPECT_EQ(stats.offers, 1);
  EXPECT_EQ(stats.released, 1);
  EXPECT_EQ(stats.released_deferred, 0);
  EXPECT_TRUE(grpc_release(mine.offer_id(), "gen0 rank 1").ok());
  stats = (*ctx)->ucx_data_plane()->stats();
  EXPECT_EQ(stats.released, 2);
  EXPECT_EQ(stats.offers, 0);
}

// An offer never released is dropped at its Offer call's deadline, also one made while
// an offer expiring later is staged (the reaper, asleep until that one's expiry, must be
// woken for it).
TEST_P(UcxTransceiverTest, AnUnreleasedOfferIsDroppedAtItsDeadline) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = Rank(Config("ctx0 rank 0", true), seed_ + 1);
  ASSERT_TRUE(ctx);
  std::unique_ptr<lockstep::v1::KvUcxService::Stub> stub = lockstep::v1::KvUcxService::NewStub(
      grpc::CreateChannel((*ctx)->address(), grpc::InsecureChannelCredentials()));
  // Request `from` offered over gRPC with `timeout` (the offer's lifetime), never released.
  const auto offer = [&](int64_t from, absl::Duration timeout) {
    const TestBlocks sent =
        RandomBlocks(RequestId(from), 23, SmallDescriptor(), /*draft=*/false, 64, 0, rng_);
    EXPECT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
    const KvPuller puller(SmallDescriptor(), KvCopiers{}, "gen0 rank 1", TransferHooks{});
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    lockstep::v1::UcxOffer made;
    EXPECT_TRUE(stub->Offer(&context, puller.Request(Receive(sent, *ctx, sent.id)), &made).ok());
    EXPECT_THAT(made.refusal(), IsEmpty());
  };
  const auto stats = [&] { return (*ctx)->ucx_data_plane()->stats(); };
  offer(7, absl::Minutes(2));  // expires long after the test
  offer(8, absl::Seconds(1));
  EXPECT_EQ(stats().offers, 2);
  ASSERT_TRUE(PollUntil([&] { return stats().expired == 1; }, absl::Seconds(30)))
      << "the offer with a 1 s deadline was not dropped within 30 s";
  EXPECT_EQ(stats().offers, 1);  // the later one stays staged
  offer(9, absl::Seconds(1));    // the reaper now sleeps until request 7's expiry
  ASSERT_TRUE(PollUntil([&] { return stats().expired == 2; }, absl::Seconds(30)));
  EXPECT_EQ(stats().offers, 1);
}

// The TCP data plane on (the fallback); the UCX transport comes from UCX_TLS.
INSTANTIATE_TEST_SUITE_P(Ucx, UcxTransceiverTest, ::testing::Values(true), testing::TransportName);

}  // namespace
}  // namespace lockstep::transfer

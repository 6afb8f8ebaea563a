// UcxWorker::Call between two workers of this process, over the transports UCX_TLS
// names (the BUILD file runs this test once with shm and once with tcp): answers,
// deadlines, a peer gone, peer checks and cancels.
#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/testing/ucx_workers.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::StatusIs;
using ::lockstep::transfer::testing::HeldOwner;
using ::lockstep::transfer::testing::MakeHeldOwner;
using ::lockstep::transfer::testing::MakeWorker;
using ::testing::HasSubstr;

#define ASSERT_OK(expr) LOCKSTEP_ASSERT_OK(expr)

// Calls (UcxWorker::Call): answered by the peer's handler, Unimplemented without one.
TEST(UcxWorkerCallTest, ACallGetsThePeersAnswer) {
  std::shared_ptr<UcxWorker> owner = MakeWorker("context");
  std::shared_ptr<UcxWorker> caller = MakeWorker("generation");
  ASSERT_TRUE(owner && caller);
  owner->ServeCalls([](absl::string_view request) { return absl::StrCat("answer to ", request); });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::StatusOr<std::string> answer = caller->Call(owner->address(), "ping", deadline, nullptr);
  ASSERT_OK(answer.status());
  EXPECT_EQ(*answer, "answer to ping");
  // A request and an answer larger than one eager fragment arrive whole.
  const std::string large(100 << 10, 'x');
  answer = caller->Call(owner->address(), large, deadline, nullptr);
  ASSERT_OK(answer.status());
  EXPECT_EQ(*answer, absl::StrCat("answer to ", large));
  owner->ServeCalls(nullptr);
  EXPECT_THAT(caller->Call(owner->address(), "ping", deadline, nullptr),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("serves no calls")));
}

TEST(UcxWorkerCallTest, ACallUnansweredByItsDeadlineEndsThere) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(5);
  ASSERT_NE(held, nullptr);
  held->owner->ServeCalls([](absl::string_view) { return std::string("answer"); });
  held->hold = false;  // connected first, so that the call below waits for its answer
  ASSERT_OK(
      held->reader->Call(held->owner->address(), "ping", absl::Now() + absl::Seconds(30), nullptr));
  ASSERT_TRUE(held->Hold());
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  EXPECT_THAT(held->reader->Call(held->owner->address(), "ping", deadline, nullptr),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("UCX call of 4 bytes did not complete by its deadline")));
  EXPECT_LT(absl::Now() - deadline, absl::Seconds(2));
  held->hold = false;
  // The endpoint was closed; the next call connects anew and is answered.
  const absl::StatusOr<std::string> answer =
      held->reader->Call(held->owner->address(), "ping", absl::Now() + absl::Seconds(30), nullptr);
  ASSERT_OK(answer.status());
  EXPECT_EQ(*answer, "answer");
}

TEST(UcxWorkerCallTest, ACallToAPeerGoneEndsWithinItsDeadline) {
  std::shared_ptr<UcxWorker> caller = MakeWorker("generation");
  std::shared_ptr<UcxWorker> owner = MakeWorker("context");
  ASSERT_TRUE(owner && caller);
  owner->ServeCalls([](absl::string_view) { return std::string("answer"); });
  const std::string address = owner->address();
  ASSERT_OK(caller->Call(address, "ping", absl::Now() + absl::Seconds(30), nullptr));
  owner.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  const absl::StatusOr<std::string> answer = caller->Call(address, "ping", deadline, nullptr);
  EXPECT_LT(absl::Now() - deadline, absl::Seconds(2));
  // Over tcp the endpoint fails; shared memory has no peer failure detection.
  EXPECT_TRUE(absl::IsUnavailable(answer.status()) || absl::IsDeadlineExceeded(answer.status()))
      << answer.status();
}

// A peer check (UcxWorker::Call's `peer_check`) that finds the peer gone ends the call
// with its error, at once, with a deadline far off; the endpoint is closed, so the next
// call connects anew. One that finds the peer alive leaves the call waiting for its
// answer.
TEST(UcxWorkerCallTest, APeerCheckEndsTheCallOnlyWhenItFails) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(7);
  ASSERT_NE(held, nullptr);
  held->owner->ServeCalls([](absl::string_view) { return std::string("answer"); });
  held->hold = false;
  const std::string address = held->owner->address();
  ASSERT_OK(held->reader->Call(address, "ping", absl::Now() + absl::Seconds(30), nullptr));
  ASSERT_TRUE(held->Hold());
  std::atomic<int> checks{0};
  const auto gone_on_third = [&checks]() -> absl::Status {
    if (++checks < 3) return absl::OkStatus();
    return absl::UnavailableError("the peer is gone (test)");
  };
  EXPECT_THAT(
      held->reader->Call(address, "ping", absl::Now() + absl::Seconds(60), nullptr, gone_on_third),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("the peer is gone (test)")));
  EXPECT_EQ(checks.load(), 3);
  held->hold = false;
  // The endpoint was closed: the next call connects anew and is answered.
  ASSERT_OK(held->reader->Call(address, "ping", absl::Now() + absl::Seconds(30), nullptr));
  // Alive: the hold is lifted from the third check, so the answer comes past several.
  ASSERT_TRUE(held->Hold());
  checks = 0;
  const auto alive = [&]() -> absl::Status {
    if (++checks == 3) held->hold = false;
    return absl::OkStatus();
  };
  const absl::StatusOr<std::string> answer =
      held->reader->Call(address, "ping", absl::Now() + absl::Seconds(60), nullptr, alive);
  ASSERT_OK(answer.status());
  EXPECT_EQ(*answer, "answer");
  EXPECT_GE(checks.load(), 3);
}

TEST(UcxWorkerCallTest, ACancelledCallEndsCancelled) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(6);
  ASSERT_NE(held, nullptr);
  held->owner->ServeCalls([](absl::string_view) { return std::string("answer"); });
  held->hold = false;
  ASSERT_OK(
      held->reader->Call(held->owner->address(), "ping", absl::Now() + absl::Seconds(30), nullptr));
  ASSERT_TRUE(held->Hold());
  std::atomic<int> checks{0};
  EXPECT_THAT(held->reader->Call(held->owner->address(), "ping", absl::InfiniteFuture(),
                                 [&checks] { return ++checks > 2; }),
              StatusIs(absl::StatusCode::kCancelled));
  held->hold = false;
}

}  // namespace
}  // namespace lockstep::transfer

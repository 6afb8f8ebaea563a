// UcxWorker::CallReply (ServeCallsWithReply): a handler that answers before it returns,
// on the UCX transports UCX_TLS names (the BUILD file runs this test with shm and tcp).
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/testing/ucx_workers.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::lockstep::transfer::testing::MakeWorker;
using ::testing::HasSubstr;

// The caller gets the early answer while the handler still runs (it waits for the
// caller's answer, up to longer than the call's deadline); the handler's return value
// is then not sent.
TEST(UcxCallReplyTest, AnAnswerSentEarlyReachesTheCallerWhileTheHandlerRuns) {
  std::shared_ptr<UcxWorker> owner = MakeWorker("context");
  std::shared_ptr<UcxWorker> caller = MakeWorker("generation");
  ASSERT_TRUE(owner && caller);
  absl::Notification answered;  // the caller has the answer
  bool waited_out = false;      // the handler saw it (read after ServeCalls(nullptr))
  owner->ServeCallsWithReply([&](absl::string_view request, UcxWorker::CallReply& reply) {
    reply.Answer(absl::StrCat("early answer to ", request));
    reply.Answer("a second answer, not sent");
    EXPECT_TRUE(reply.answered());
    waited_out = answered.WaitForNotificationWithTimeout(absl::Seconds(40));
    return std::string("the return value, not sent");
  });
  absl::StatusOr<std::string> answer =
      caller->Call(owner->address(), "ping", absl::Now() + absl::Seconds(20), nullptr);
  answered.Notify();
  owner->ServeCalls(nullptr);  // waits for the handler
  EXPECT_TRUE(waited_out);
  ASSERT_THAT(answer.status(), IsOk());
  EXPECT_EQ(*answer, "early answer to ping");
  EXPECT_THAT(caller->Call(owner->address(), "ping", absl::Now() + absl::Seconds(20), nullptr),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("serves no calls")));
}

// A handler that never calls Answer is answered with what it returns.
TEST(UcxCallReplyTest, AHandlerThatDoesNotAnswerEarlyIsAnsweredWithItsReturnValue) {
  std::shared_ptr<UcxWorker> owner = MakeWorker("context");
  std::shared_ptr<UcxWorker> caller = MakeWorker("generation");
  ASSERT_TRUE(owner && caller);
  owner->ServeCallsWithReply([](absl::string_view request, UcxWorker::CallReply& reply) {
    EXPECT_FALSE(reply.answered());
    return absl::StrCat("answer to ", request);
  });
  absl::StatusOr<std::string> answer =
      caller->Call(owner->address(), "ping", absl::Now() + absl::Seconds(20), nullptr);
  ASSERT_THAT(answer.status(), IsOk());
  EXPECT_EQ(*answer, "answer to ping");
}

}  // namespace
}  // namespace lockstep::transfer

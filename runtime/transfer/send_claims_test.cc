#include "runtime/transfer/send_claims.h"

#include <memory>
#include <vector>

#include "common/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::IsEmpty;

class SendClaimsTest : public ::testing::Test {
 protected:
  SendSpec Spec(int64_t id, absl::Duration lease = absl::Seconds(10)) {
    SendSpec spec;
    spec.blocks.id = RequestId(id);
    spec.blocks.generation = 100 + static_cast<uint64_t>(id);
    spec.num_tokens = 1;
    spec.blocks.blocks = {BlockId(0)};
    spec.lease_expiry = clock_.Now() + lease;
    return spec;
  }

  // No ServerContext: these tests drive the claims without gRPC.
  std::shared_ptr<ActivePull> Begin(int64_t id) {
    absl::StatusOr<std::shared_ptr<ActivePull>> pull = claims_->BeginPull(RequestId(id), nullptr);
    EXPECT_THAT(pull.status(), IsOk());
    return pull.ok() ? *pull : nullptr;
  }

  FakeClock clock_;
  std::shared_ptr<EventQueue> events_ = std::make_shared<EventQueue>();
  std::shared_ptr<SendClaims> claims_ = SendClaims::Create(&clock_, events_);
};

TEST_F(SendClaimsTest, APullEndsTheClaimOnceWhenTheLastReferenceGoes) {
  ASSERT_THAT(claims_->Add(Spec(1)), IsOk());
  EXPECT_THAT(claims_->Add(Spec(1)), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(claims_->BeginPull(RequestId(2), nullptr).status(),
              StatusIs(absl::StatusCode::kNotFound));
  std::shared_ptr<ActivePull> pull = Begin(1);
  ASSERT_NE(pull, nullptr);
  EXPECT_EQ(pull->spec().blocks.generation, 101u);
  EXPECT_THAT(claims_->BeginPull(RequestId(1), nullptr).status(),
              StatusIs(absl::StatusCode::kAlreadyExists));
  pull->Finish(absl::OkStatus());
  pull->Finish(absl::InternalError("later outcomes do not count"));
  // A gRPC slice still pointing into the blocks keeps the claim open.
  std::shared_ptr<const void> slice = pull;
  pull.reset();
  EXPECT_EQ(events_->size(), 0u);
  EXPECT_EQ(claims_->size(), 1u);
  slice.reset();
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, TransferKind::kSend);
  EXPECT_EQ(events[0].id, RequestId(1));
  EXPECT_EQ(events[0].generation, 101u);
  EXPECT_THAT(events[0].status, IsOk());
  EXPECT_EQ(claims_->size(), 0u);
  EXPECT_THAT(claims_->BeginPull(RequestId(1), nullptr).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SendClaimsTest, CancelDuringAPullWaitsForIt) {
  ASSERT_THAT(claims_->Add(Spec(1)), IsOk());
  std::shared_ptr<ActivePull> pull = Begin(1);
  ASSERT_NE(pull, nullptr);
  claims_->Cancel(RequestId(1));
  EXPECT_TRUE(pull->abort_signal().HasBeenNotified());
  ASSERT_TRUE(pull->aborted().has_value());
  EXPECT_THAT(*pull->aborted(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(events_->size(), 0u);
  pull->Finish(absl::OkStatus());  // the abort reason wins
  pull.reset();
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(SendClaimsTest, LeaseExpiryEndsIdleClaimsAndAbortsRunningPulls) {
  ASSERT_THAT(claims_->Add(Spec(1, absl::Seconds(5))), IsOk());
  ASSERT_THAT(claims_->Add(Spec(2, absl::Seconds(5))), IsOk());
  ASSERT_THAT(claims_->Add(Spec(3, absl::Seconds(50))), IsOk());
  std::shared_ptr<ActivePull> pull = Begin(2);
  ASSERT_NE(pull, nullptr);
  claims_->ExpireLeases(clock_.Now() + absl::Seconds(4));
  EXPECT_EQ(events_->size(), 0u);
  claims_->ExpireLeases(clock_.Now() + absl::Seconds(5));
  std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, RequestId(1));
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(pull->abort_signal().HasBeenNotified());
  claims_->ExpireLeases(clock_.Now() + absl::Seconds(6));  // no second abort, no event
  EXPECT_EQ(events_->size(), 0u);
  pull.reset();
  events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, RequestId(2));
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(claims_->size(), 1u);  // request 3 still offered
}

TEST_F(SendClaimsTest, APullWithoutAnOutcomeEndsInternal) {
  ASSERT_THAT(claims_->Add(Spec(1)), IsOk());
  Begin(1).reset();
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kInternal));
}

TEST_F(SendClaimsTest, ShutdownAbortsPullsAndRefusesNewWork) {
  ASSERT_THAT(claims_->Add(Spec(1)), IsOk());
  ASSERT_THAT(claims_->Add(Spec(2)), IsOk());
  std::shared_ptr<ActivePull> pull = Begin(1);
  ASSERT_NE(pull, nullptr);
  claims_->Shutdown();
  ASSERT_TRUE(pull->aborted().has_value());
  EXPECT_THAT(*pull->aborted(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(claims_->Add(Spec(3)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(claims_->BeginPull(RequestId(2), nullptr).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  pull.reset();
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(events_->Drain(), IsEmpty());
}

}  // namespace
}  // namespace lockstep::transfer

#include "runtime/router/routing/queue_limit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::testing::HasSubstr;

TEST(QueueLimitTest, RoomBelowTheLimitAndAlwaysWithoutOne) {
  EXPECT_TRUE(HasQueueRoom(0, 2));
  EXPECT_TRUE(HasQueueRoom(1, 2));
  EXPECT_FALSE(HasQueueRoom(2, 2));
  EXPECT_FALSE(HasQueueRoom(3, 2));
  EXPECT_TRUE(HasQueueRoom(1000000, 0));
  EXPECT_TRUE(HasQueueRoom(1000000, -1));
}

TEST(QueueLimitTest, TheRefusalNamesTheRoleAndTheFieldAndIsRecognised) {
  const absl::Status full = QueueFullStatus("generation", 4);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("every healthy generation instance has 4 requests"));
  EXPECT_THAT(full.message(), HasSubstr("router.max_queued_requests"));
  EXPECT_TRUE(IsQueueFull(full));
  EXPECT_FALSE(IsQueueFull(absl::ResourceExhaustedError("router.max_concurrent_requests")));
  EXPECT_FALSE(IsQueueFull(absl::UnavailableError("(router.max_queued_requests)")));
}

}  // namespace
}  // namespace lockstep::router

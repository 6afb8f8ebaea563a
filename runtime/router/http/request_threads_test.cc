#include "runtime/router/http/request_threads.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/testing/poll_until.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

TEST(RequestThreadsTest, RunsEachBodyOnItsOwnThreadAndJoinsThemAll) {
  RequestThreads threads;
  absl::Notification release;
  std::atomic<int> ran{0};
  constexpr int kBodies = 8;
  for (int i = 0; i < kBodies; ++i) {
    ASSERT_TRUE(threads
                    .Run([&] {
                      // Every body waits for the same release: they run at once.
                      EXPECT_TRUE(release.WaitForNotificationWithTimeout(absl::Seconds(30)));
                      ran.fetch_add(1);
                    })
                    .ok());
  }
  EXPECT_EQ(threads.running(), kBodies);
  release.Notify();
  threads.JoinAll();
  EXPECT_EQ(ran.load(), kBodies);
  EXPECT_EQ(threads.running(), 0);
}

TEST(RequestThreadsTest, FinishedThreadsAreJoinedAsNewOnesStart) {
  RequestThreads threads;
  for (int i = 0; i < 200; ++i) {
    absl::Notification done;
    ASSERT_TRUE(threads.Run([&] { done.Notify(); }).ok());
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  // Each hands itself over once its body returned.
  EXPECT_TRUE(lockstep::testing::PollUntil([&] { return threads.running() == 0; }));
  threads.JoinAll();
}

TEST(RequestThreadsTest, RefusesBodiesAfterJoinAll) {
  RequestThreads threads;
  threads.JoinAll();
  bool ran = false;
  const absl::Status status = threads.Run([&] { ran = true; });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace lockstep::router

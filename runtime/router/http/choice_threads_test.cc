#include "runtime/router/http/choice_threads.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// A starter that refuses its `fail_at`-th call (0-based) as the system would, and
// counts the threads it started that have ended.
struct FlakyStarter {
  int fail_at = -1;
  std::atomic<int> calls{0};
  std::atomic<int> ended{0};

  ThreadStarter starter() {
    return [this](std::function<void()> body) -> absl::StatusOr<std::thread> {
      if (calls.fetch_add(1) == fail_at) {
        return absl::UnavailableError("Resource temporarily unavailable");
      }
      return StartThread([this, body = std::move(body)] {
        body();
        ended.fetch_add(1);
      });
    };
  }
};

TEST(ChoiceThreadsTest, EveryChoiceRunsOnItsOwnThreadAndRunWaitsForAll) {
  absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads = ChoiceThreads::Start(4, StartThread);
  ASSERT_TRUE(threads.ok()) << threads.status();
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  std::set<int32_t> ran;
  std::thread::id first;
  (*threads)->Run([&](int32_t i) {
    absl::MutexLock lock(&mu);
    ids.insert(std::this_thread::get_id());
    ran.insert(i);
    if (i == 0) first = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(first, std::this_thread::get_id());  // choice 0 on the caller
}

TEST(ChoiceThreadsTest, OneChoiceStartsNoThread) {
  FlakyStarter flaky;
  absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads = ChoiceThreads::Start(1, flaky.starter());
  ASSERT_TRUE(threads.ok());
  int runs = 0;
  (*threads)->Run([&](int32_t) { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(flaky.calls.load(), 0);
}

// The system refuses the third thread: the request fails with UNAVAILABLE (HTTP 503)
// naming the choice, before any choice ran; the two started threads end (joined, so the
// process is not terminated by a joinable std::thread's destructor).
TEST(ChoiceThreadsTest, AThreadThatCannotStartFailsTheRequestBeforeAnyChoiceRuns) {
  FlakyStarter flaky;
  flaky.fail_at = 2;
  absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads = ChoiceThreads::Start(5, flaky.starter());
  EXPECT_THAT(threads.status(), StatusIs(absl::StatusCode::kUnavailable,
                                         HasSubstr("cannot start a thread for choice 3 of 5")));
  EXPECT_THAT(threads.status().message(), HasSubstr("Resource temporarily unavailable"));
  EXPECT_EQ(flaky.calls.load(), 3);
  EXPECT_EQ(flaky.ended.load(), 2);
}

TEST(ChoiceThreadsTest, WithoutRunTheParkedThreadsEndWithoutRunningAChoice) {
  FlakyStarter flaky;
  {
    absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads =
        ChoiceThreads::Start(3, flaky.starter());
    ASSERT_TRUE(threads.ok());
  }
  EXPECT_EQ(flaky.ended.load(), 2);
}

}  // namespace
}  // namespace lockstep::router

#include "common/testing/poll_until.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep::testing {
namespace {

TEST(PollUntilTest, TrueAtOnceChecksOnce) {
  int calls = 0;
  EXPECT_TRUE(PollUntil([&] { return ++calls > 0; }, absl::ZeroDuration()));
  EXPECT_EQ(calls, 1);
}

TEST(PollUntilTest, WaitsForAnotherThread) {
  std::atomic<bool> done{false};
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    done = true;
  });
  EXPECT_TRUE(PollUntil([&] { return done.load(); }, absl::Seconds(30)));
  setter.join();
}

TEST(PollUntilTest, FalseAfterTheTimeoutAtTheInterval) {
  int calls = 0;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(PollUntil(
      [&] {
        ++calls;
        return false;
      },
      absl::Milliseconds(50), absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_GE(calls, 2);
  EXPECT_LE(calls, 10);  // about 50 / 20 + 1; never a busy loop
}

}  // namespace
}  // namespace lockstep::testing

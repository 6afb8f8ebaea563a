// Poll's phases on a fake clock (no sleeps, no wall clock): spin, yield, then sleep.
#include "runtime/cuda/poll.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep::cuda {
namespace {

// The fake clock: each check of the readiness takes kCheck; a sleep takes its duration.
constexpr absl::Duration kCheck = absl::Microseconds(100);
absl::Time fake_now = absl::UnixEpoch();
int yields = 0;
std::vector<absl::Duration> sleeps;
std::vector<absl::Time> sleep_starts;

PollHooks FakeHooks() {
  fake_now = absl::UnixEpoch();
  yields = 0;
  sleeps.clear();
  sleep_starts.clear();
  PollHooks hooks;
  hooks.now = [] { return fake_now; };
  hooks.yield = [] { ++yields; };
  hooks.sleep = [](absl::Duration d) {
    sleep_starts.push_back(fake_now);
    sleeps.push_back(d);
    fake_now += d;
  };
  return hooks;
}

// Ready from `at` on (fake time), each check advancing the clock.
auto ReadyAt(absl::Time at) {
  return [at]() -> absl::StatusOr<bool> {
    fake_now += kCheck;
    return fake_now >= at;
  };
}

// A forward of 20 ms: no sleep at all (a sleep back-off would overshoot it by up to
// 1 ms); seen done at the first check after it.
TEST(PollTest, AShortWaitYieldsAndNeverSleeps) {
  const PollHooks hooks = FakeHooks();
  const absl::Time done = absl::UnixEpoch() + absl::Milliseconds(20);
  ASSERT_TRUE(
      Poll(ReadyAt(done), done + absl::Seconds(30), absl::Microseconds(50), "forward", hooks).ok());
  EXPECT_TRUE(sleeps.empty()) << sleeps.size() << " sleeps, the first at "
                              << (sleep_starts.empty() ? absl::ZeroDuration()
                                                       : sleep_starts[0] - absl::UnixEpoch());
  EXPECT_GT(yields, 0);
  EXPECT_LE(fake_now - done, kCheck);
}

// A long wait sleeps only after the yield window, each sleep at most kPollMaxBackoff.
TEST(PollTest, ALongWaitSleepsAfterTheYieldWindow) {
  const PollHooks hooks = FakeHooks();
  const absl::Duration spin = absl::Microseconds(50);
  const absl::Time done = absl::UnixEpoch() + absl::Milliseconds(200);
  ASSERT_TRUE(Poll(ReadyAt(done), done + absl::Seconds(30), spin, "prefill", hooks).ok());
  ASSERT_FALSE(sleeps.empty());
  EXPECT_GE(sleep_starts[0] - absl::UnixEpoch(), spin + kPollYieldFor);
  for (absl::Duration d : sleeps) EXPECT_LE(d, kPollMaxBackoff);
  EXPECT_LE(fake_now - done, kPollMaxBackoff + kCheck);
}

// The deadline ends the wait, and no sleep runs past it.
TEST(PollTest, TheDeadlineEndsTheWait) {
  const PollHooks hooks = FakeHooks();
  const absl::Time deadline = absl::UnixEpoch() + absl::Milliseconds(80);
  const absl::Status s =
      Poll(ReadyAt(absl::InfiniteFuture()), deadline, absl::Microseconds(50), "collective", hooks);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_EQ(s.message(), "collective not complete");
  for (size_t i = 0; i < sleeps.size(); ++i) EXPECT_LE(sleep_starts[i] + sleeps[i], deadline);
}

TEST(PollTest, AnErrorEndsTheWait) {
  const PollHooks hooks = FakeHooks();
  const absl::Status s =
      Poll([]() -> absl::StatusOr<bool> { return absl::InternalError("boom"); },
           absl::UnixEpoch() + absl::Seconds(1), absl::ZeroDuration(), "x", hooks);
  EXPECT_EQ(s, absl::InternalError("boom"));
}

}  // namespace
}  // namespace lockstep::cuda

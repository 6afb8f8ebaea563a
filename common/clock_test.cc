#include "common/clock.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Milliseconds(5));
  EXPECT_EQ(clock.Now(), t0 + absl::Milliseconds(5));
  clock.SetTime(t0 + absl::Seconds(1));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(1));
}

TEST(FakeClockTest, SleepUntilJumpsForwardNeverBack) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  clock.SleepUntil(t0 + absl::Seconds(3));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(3));
  clock.SleepUntil(t0);
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(3));
}

TEST(FakeClockDeathTest, GoingBackwardsIsABug) {
  FakeClock clock;
  EXPECT_DEATH(clock.SetTime(clock.Now() - absl::Seconds(1)), "cannot go backwards");
  EXPECT_DEATH(clock.Advance(absl::Seconds(-1)), "cannot go backwards");
}

TEST(SystemClockTest, IsMonotonicAndNearWallTime) {
  SystemClock clock;
  absl::Time prev = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    const absl::Time now = clock.Now();
    ASSERT_GE(now, prev);
    prev = now;
  }
  EXPECT_LT(absl::AbsDuration(clock.Now() - absl::Now()), absl::Seconds(5));
}

TEST(SystemClockTest, SleepUntilPastDeadlineReturnsAtOnce) {
  SystemClock clock;
  const absl::Time before = clock.Now();
  clock.SleepUntil(before - absl::Seconds(10));
  EXPECT_GE(clock.Now(), before);
}

}  // namespace
}  // namespace lockstep

#include "runtime/worker/deadline_timers.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

TEST(DeadlineTimersTest, RunsInDeadlineOrder) {
  DeadlineTimers timers;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification done;
  // Scheduled out of order; the latest one ends the test (a past deadline runs at once).
  timers.Schedule(absl::Milliseconds(30), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(3);
    done.Notify();
  });
  timers.Schedule(absl::Milliseconds(20), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(2);
  });
  timers.Schedule(-absl::Seconds(1), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(1);
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(DeadlineTimersTest, CancelledCallbacksNeverRun) {
  DeadlineTimers timers;
  bool ran = false;
  const DeadlineTimers::Id id = timers.Schedule(absl::Hours(1), [&] { ran = true; });
  EXPECT_EQ(timers.pending(), 1);
  EXPECT_TRUE(timers.Cancel(id));
  EXPECT_FALSE(timers.Cancel(id));  // once
  EXPECT_EQ(timers.pending(), 0);
  EXPECT_FALSE(timers.Cancel(12345));
  // A callback scheduled after the cancel still runs (the thread is not stuck).
  absl::Notification later;
  timers.Schedule(absl::ZeroDuration(), [&] { later.Notify(); });
  EXPECT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(ran);
}

// A callback may schedule another one (the stream timers re-arm from their callback).
TEST(DeadlineTimersTest, CallbacksMayScheduleMore) {
  DeadlineTimers timers;
  absl::Notification second;
  timers.Schedule(absl::ZeroDuration(), [&] {
    timers.Schedule(absl::ZeroDuration(), [&] { second.Notify(); });
  });
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// The destructor drops what has not run and returns without waiting for it.
TEST(DeadlineTimersTest, DestructionDropsPendingCallbacks) {
  bool ran = false;
  {
    DeadlineTimers timers;
    timers.Schedule(absl::Hours(24), [&] { ran = true; });
  }
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace lockstep::worker

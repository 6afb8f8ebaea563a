#include "runtime/worker/wake_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

TEST(WakePoolTest, RunsEveryTaskOnItsThreads) {
  std::atomic<int> ran{0};
  absl::Notification all;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  {
    WakePool pool(3);
    for (int i = 0; i < 1000; ++i) {
      pool.Run([&] {
        if (std::this_thread::get_id() == caller) on_caller = true;
        if (ran.fetch_add(1) + 1 == 1000) all.Notify();
      });
    }
    EXPECT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_FALSE(on_caller.load());
}

TEST(WakePoolTest, OneThreadRunsInOrderAndTheDestructorDrains) {
  absl::Mutex mu;
  std::vector<int> order;
  {
    WakePool pool(1);
    for (int i = 0; i < 100; ++i) {
      pool.Run([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      });
    }
  }  // joins after running everything queued
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

}  // namespace
}  // namespace lockstep::worker

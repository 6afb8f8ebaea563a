// GrammarMaskWorker: every item is computed exactly once, by the worker thread while the
// caller is busy or by the caller at Finish; a caller that waits sees the worker compute
// them all; an item in progress past the deadline makes Finish DeadlineExceeded.
#include "runtime/engine/cpu/grammar_mask_worker.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

constexpr absl::Duration kLong = absl::Seconds(60);

TEST(GrammarMaskWorkerTest, EveryItemIsComputedOnceWhoeverComputesIt) {
  GrammarMaskWorker worker;
  for (int round = 0; round < 50; ++round) {
    auto counts = std::make_shared<std::vector<std::atomic<int>>>(17);
    worker.Start(17, [counts](int i) { ++(*counts)[i]; });
    ASSERT_TRUE(worker.Finish().ok());  // takes back what the thread has not claimed
    for (int i = 0; i < 17; ++i) EXPECT_EQ((*counts)[i].load(), 1) << "round " << round;
  }
}

TEST(GrammarMaskWorkerTest, TheWorkerComputesWhileTheCallerWaits) {
  GrammarMaskWorker worker;
  auto counts = std::make_shared<std::vector<std::atomic<int>>>(5);
  worker.Start(5, [counts](int i) { ++(*counts)[i]; });
  ASSERT_TRUE(worker.AwaitWorkerIdle(kLong));
  EXPECT_EQ(worker.completed_by_worker(), 5);
  ASSERT_TRUE(worker.Finish().ok());
  EXPECT_EQ(worker.completed_by_worker(), 0);  // no job
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*counts)[i].load(), 1);
}

TEST(GrammarMaskWorkerTest, NoJobNoThreadNoWait) {
  GrammarMaskWorker worker;
  EXPECT_TRUE(worker.Finish().ok());
  worker.Start(0, [](int) { FAIL() << "nothing to compute"; });
  EXPECT_TRUE(worker.Finish().ok());
  EXPECT_TRUE(worker.AwaitWorkerIdle(absl::ZeroDuration()));
}

// The item stays blocked until after Finish returned, so Finish must give up.
TEST(GrammarMaskWorkerTest, AnItemPastTheDeadlineIsDeadlineExceeded) {
  GrammarMaskWorker worker(absl::Milliseconds(5));
  auto started = std::make_shared<absl::Notification>();
  auto release = std::make_shared<absl::Notification>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  worker.Start(1, [started, release, done](int) {
    started->Notify();
    EXPECT_TRUE(release->WaitForNotificationWithTimeout(kLong));
    *done = true;
  });
  ASSERT_TRUE(started->WaitForNotificationWithTimeout(kLong));
  const absl::Status status = worker.Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_FALSE(done->load());
  release->Notify();
  // The worker takes the next job once the late item ends.
  auto counts = std::make_shared<std::vector<std::atomic<int>>>(3);
  worker.Start(3, [counts](int i) { ++(*counts)[i]; });
  EXPECT_TRUE(worker.Finish().ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*counts)[i].load(), 1);
}

}  // namespace
}  // namespace lockstep::engine

#include "runtime/transfer/event_queue.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

TEST(EventQueueTest, DrainsInPushOrder) {
  EventQueue queue;
  EXPECT_TRUE(queue.Drain().empty());
  queue.Push({TransferKind::kSend, RequestId(1), 3, absl::OkStatus()});
  queue.Push({TransferKind::kReceive, RequestId(2), 4, absl::CancelledError("x")});
  EXPECT_EQ(queue.size(), 2u);
  const std::vector<TransferEvent> events = queue.Drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, RequestId(1));
  EXPECT_EQ(events[0].generation, 3u);
  EXPECT_EQ(events[1].kind, TransferKind::kReceive);
  EXPECT_TRUE(absl::IsCancelled(events[1].status));
  EXPECT_TRUE(queue.Drain().empty());
}

TEST(EventQueueTest, WaitReturnsWhenAnotherThreadPushes) {
  EventQueue queue;
  EXPECT_FALSE(queue.WaitNonEmpty(absl::Milliseconds(1)));
  absl::Notification waiting;
  std::thread pusher([&] {
    waiting.WaitForNotificationWithTimeout(absl::Seconds(10));
    queue.Push({TransferKind::kSend, RequestId(7), 1, absl::OkStatus()});
  });
  waiting.Notify();
  EXPECT_TRUE(queue.WaitNonEmpty(absl::Seconds(10)));
  pusher.join();
  EXPECT_EQ(queue.Drain().size(), 1u);
}

}  // namespace
}  // namespace lockstep::transfer

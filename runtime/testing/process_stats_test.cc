#include "runtime/testing/process_stats.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace lockstep::process {
namespace {

TEST(ProcessStatsTest, AThreadStartedIsCountedWhileItRuns) {
  const int before = ThreadCount();
  ASSERT_GE(before, 1);
  absl::Notification release;
  std::thread waiter([&release] { release.WaitForNotification(); });
  // The thread exists once its constructor returned; it waits until released.
  EXPECT_EQ(ThreadCount(), before + 1);
  release.Notify();
  waiter.join();
}

TEST(ProcessStatsTest, TouchedMemoryIsResident) {
  const int64_t before = RssKib();
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = size_t{64} << 20;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);  // every page touched: resident until freed
  EXPECT_GE(RssKib(), before + static_cast<int64_t>(kBytes / 1024) * 9 / 10);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(ProcessStatsTest, CpuTimeGrowsWithWork) {
  const double before = CpuSeconds();
  ASSERT_GE(before, 0.0);
  // Works until the kernel has charged more CPU time (its tick is at most 10 ms; the
  // bound on rounds only keeps a broken clock from looping forever).
  volatile uint64_t sink = 0;
  double now = before;
  for (int round = 0; round < 1'000'000 && now <= before; ++round) {
    for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<uint64_t>(i);
    now = CpuSeconds();
  }
  EXPECT_GT(now, before);
}

}  // namespace
}  // namespace lockstep::process
